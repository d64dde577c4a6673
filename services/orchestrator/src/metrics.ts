import type { Counter, ServiceMetrics } from "@toolgate/telemetry";

/** A call whose tool no contract names (UNKNOWN_TOOL): one label value, however many names a model invents. */
export const UNKNOWN_TOOL_LABEL = "<unknown>";

/** The orchestrator's own metrics (the bus and database counts come with every service's registry). */
export interface OrchestratorMetrics {
  /** Calls whose terminal result this process attached, by tool and outcome (`ok` or the error code). */
  calls: Counter<"tool" | "outcome">;
  /** Managed runs this process stopped, by reason (the `budget_*`, `repeated_call` and `approval_timeout` reasons are budgets). */
  runsStopped: Counter<"reason">;
  /** How requests with an Idempotency-Key were decided (`replay`, `mismatch`: 422, `in_flight`: 409, …). */
  idempotency: Counter<"decision">;
}

/** Registers the orchestrator's metrics in `metrics`. */
export function orchestratorMetrics(metrics: ServiceMetrics): OrchestratorMetrics {
  return {
    calls: metrics.counter({
      name: "toolgate_calls_total",
      help: "Calls that ended, by tool and outcome (ok or the terminal result's error code); counted once, when the result is attached.",
      labelNames: ["tool", "outcome"],
    }),
    runsStopped: metrics.counter({
      name: "toolgate_runs_stopped_total",
      help: "Managed runs stopped, by reason (budget_*, repeated_call and approval_timeout are budget stops).",
      labelNames: ["reason"],
    }),
    idempotency: metrics.counter({
      name: "toolgate_host_idempotency_decisions_total",
      help: "Requests with an Idempotency-Key, by decision: claimed, taken_over, replay, mismatch (422), in_flight (409).",
      labelNames: ["decision"],
    }),
  };
}
