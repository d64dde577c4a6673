import type { Counter, Histogram, ServiceMetrics } from "@toolgate/telemetry";

/** The executor's own metrics (the bus and database counts come with every service's registry). */
export interface ExecutorMetrics {
  /** Wall-clock time of each attempt that ran a tool, by tool. */
  executions: Histogram<"tool">;
  /** Retries scheduled after a retryable failure, by tool and the failure's code. */
  retries: Counter<"tool" | "code">;
  /** Calls given up on (deliveries exhausted, poison messages), by tool. */
  deadLetters: Counter<"tool">;
  /** Calls that ended OUTCOME_UNKNOWN (an effect that may or may not have happened), by tool. */
  unknownOutcomes: Counter<"tool">;
  /** Unknown outcomes settled through the tool's status check, by tool and outcome (applied, not_applied, still_unknown). */
  reconciliations: Counter<"tool" | "outcome">;
  /** Idempotency-key claims that found the key decided or held: replay, conflict, busy, taken_over. */
  idempotency: Counter<"tool" | "outcome">;
}

/** Registers the executor's metrics in `metrics`. */
export function executorMetrics(metrics: ServiceMetrics): ExecutorMetrics {
  return {
    executions: metrics.histogram({
      name: "toolgate_tool_execution_duration_seconds",
      help: "Wall-clock time of each tool attempt the executor ran (retried attempts included), by tool.",
      labelNames: ["tool"],
    }),
    retries: metrics.counter({
      name: "toolgate_retries_total",
      help: "Retries scheduled after a retryable failure, by tool and error code.",
      labelNames: ["tool", "code"],
    }),
    deadLetters: metrics.counter({
      name: "toolgate_dead_letters_total",
      help: "Calls the executor gave up on (deliveries exhausted, poison messages); each ends EXECUTION_ERROR.",
      labelNames: ["tool"],
    }),
    unknownOutcomes: metrics.counter({
      name: "toolgate_outcome_unknown_total",
      help: "Calls that ended OUTCOME_UNKNOWN: a side effect that may or may not have happened, by tool.",
      labelNames: ["tool"],
    }),
    reconciliations: metrics.counter({
      name: "toolgate_reconciliations_total",
      help: "Unknown outcomes settled through the tool's status check, by tool and outcome (applied, not_applied, still_unknown).",
      labelNames: ["tool", "outcome"],
    }),
    idempotency: metrics.counter({
      name: "toolgate_executor_idempotency_total",
      help: "Idempotency-key claims that found the key already used: replay (stored result), conflict (other arguments), busy (held by a live attempt), taken_over.",
      labelNames: ["tool", "outcome"],
    }),
  };
}
