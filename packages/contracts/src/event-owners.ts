import type { ServiceName } from "./events.js";
import type { CallEventType, RunEventType } from "./subjects.js";

/**
 * The one service that publishes each call event type: the state it owns. The NATS permissions of each
 * service's identity are derived from this table (a service may publish only the types it owns), so a
 * service that tries to publish another's transition is refused by the server itself.
 */
export const CALL_EVENT_OWNERS = {
  proposed: "orchestrator",
  rejected: "policy",
  denied: "policy",
  approval_requested: "policy",
  approval_granted: "policy",
  authorized: "policy",
  started: "executor",
  completed: "executor",
  outcome_unknown: "executor",
  refused: "executor",
  retry_scheduled: "executor",
  operation_updated: "executor",
  reconciled: "executor",
  dead_lettered: "executor",
  result_attached: "orchestrator",
  cancel_requested: "orchestrator",
} as const satisfies Record<Exclude<CallEventType, "event_refused">, ServiceName>;

/** Every run event is the orchestrator's: it drives runs. */
export const RUN_EVENT_OWNERS = {
  started: "orchestrator",
  model_responded: "orchestrator",
  completed: "orchestrator",
  stopped: "orchestrator",
} as const satisfies Record<Exclude<RunEventType, "event_refused">, ServiceName>;

/**
 * Who may report an `event_refused` (of a call or a run): every service that acts on events it consumes. It is
 * the one type with several publishers; each signs its own reports, and nothing acts on them but audit.
 */
export const REFUSAL_REPORTERS = ["orchestrator", "policy", "executor"] as const satisfies readonly ServiceName[];
