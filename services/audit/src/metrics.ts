import type { Counter, ServiceMetrics } from "@toolgate/telemetry";

/** Audit's own metrics (the bus and database counts come with every service's registry). */
export interface AuditMetrics {
  /** Chain verifications asked of the API, by scope (`call`, `run`) and result (`ok`, `broken`). */
  verifications: Counter<"scope" | "result">;
}

/** Registers audit's metrics in `metrics`. */
export function auditMetrics(metrics: ServiceMetrics): AuditMetrics {
  return {
    verifications: metrics.counter({
      name: "toolgate_audit_verifications_total",
      help: "Hash-chain verifications answered by the audit API, by scope (call, run) and result (ok, broken: a verification failure).",
      labelNames: ["scope", "result"],
    }),
  };
}
