import type { Counter, ServiceMetrics } from "@toolgate/telemetry";

/** Audit's own metrics (the bus and database counts come with every service's registry). */
export interface AuditMetrics {
  /** Chain verifications asked of the API, by scope (`call`, `run`) and result (`ok`, `broken`). */
  verifications: Counter<"scope" | "result">;
  /** Events a service refused as not signed by their owner (its `event_refused` reports), by reporter and reason. */
  refusals: Counter<"reporter" | "reason">;
}

/** Registers audit's metrics in `metrics`. */
export function auditMetrics(metrics: ServiceMetrics): AuditMetrics {
  return {
    verifications: metrics.counter({
      name: "toolgate_audit_verifications_total",
      help: "Hash-chain verifications answered by the audit API, by scope (call, run) and result (ok, broken: a verification failure).",
      labelNames: ["scope", "result"],
    }),
    refusals: metrics.counter({
      name: "toolgate_audit_refused_events_total",
      help: "Events a service refused because their owner did not sign them (forged, unsigned or signed by another role), by reporting service and reason.",
      labelNames: ["reporter", "reason"],
    }),
  };
}
