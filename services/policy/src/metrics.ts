import type { Histogram, ServiceMetrics } from "@toolgate/telemetry";
import type { ApprovalDesk } from "./approval-desk.js";

/** Policy's own metrics (the bus and database counts come with every service's registry). */
export interface PolicyMetrics {
  /** How long a decision took (catalog, schema, Cedar, quota), by verdict. */
  decisions: Histogram<"verdict">;
}

/**
 * Registers policy's metrics in `metrics`. The approval gauges are read from the store at scrape time (one read
 * per scrape, shared by both), so every replica reports the deployment's whole queue: aggregate them with `max`.
 */
export function policyMetrics(metrics: ServiceMetrics, desk: Pick<ApprovalDesk, "pending">, now: () => number = Date.now): PolicyMetrics {
  let reading: ReturnType<ApprovalDesk["pending"]> | undefined;
  // Both gauges are collected at once by a scrape; a failed read keeps the previous values.
  const pending = () => (reading ??= desk.pending().finally(() => (reading = undefined)));
  metrics.gauge({
    name: "toolgate_approvals_pending",
    help: "Approval requests waiting for a human decision (open, undecided, not expired), across the deployment.",
    async collect() {
      const read = await pending().catch(() => undefined);
      if (read) this.set(read.count);
    },
  });
  metrics.gauge({
    name: "toolgate_approval_oldest_pending_age_seconds",
    help: "Age of the oldest approval request still waiting for a decision; 0 when none waits.",
    async collect() {
      const read = await pending().catch(() => undefined);
      if (read) this.set(read.oldestRequestedAt ? Math.max(0, (now() - read.oldestRequestedAt.getTime()) / 1_000) : 0);
    },
  });
  return {
    decisions: metrics.histogram({
      name: "toolgate_policy_decision_duration_seconds",
      help: "Time policy took to decide a proposal (catalog lookup, schema validation, Cedar, quota), by verdict.",
      labelNames: ["verdict"],
    }),
  };
}
