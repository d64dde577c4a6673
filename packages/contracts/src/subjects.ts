import { isSubjectSafe } from "./ids.js";

/** Every call state transition, in the order a successful call normally goes through them. */
export const CALL_EVENT_TYPES = [
  "proposed",
  "rejected",
  "denied",
  "approval_requested",
  "approval_granted",
  "authorized",
  "started",
  "completed",
  "outcome_unknown",
  "refused",
  "retry_scheduled",
  "operation_updated",
  "reconciled",
  "dead_lettered",
  "result_attached",
  "cancel_requested",
  "event_refused",
] as const;
export type CallEventType = (typeof CALL_EVENT_TYPES)[number];

/** The call events that end a call: exactly one of them is published per call. */
export const TERMINAL_CALL_EVENT_TYPES = ["rejected", "denied", "completed", "outcome_unknown"] as const satisfies readonly CallEventType[];
export type TerminalCallEventType = (typeof TERMINAL_CALL_EVENT_TYPES)[number];

/** Every run state transition. */
export const RUN_EVENT_TYPES = ["started", "model_responded", "completed", "stopped", "event_refused"] as const;
export type RunEventType = (typeof RUN_EVENT_TYPES)[number];

/**
 * The subject catalogue under one prefix: `<prefix>.call.<call_id>.<event>` and `<prefix>.run.<run_id>.<event>`.
 * Ids must be subject-safe; a provider's call id is never used in a subject.
 */
export interface SubjectCatalogue {
  readonly prefix: string;
  /** JetStream stream that stores every call and run event. */
  readonly stream: string;
  call(callId: string, type: CallEventType): string;
  run(runId: string, type: RunEventType): string;
  /** Filter matching one call event type for every call, e.g. `toolgate.call.*.proposed`. */
  callEvents(type: CallEventType): string;
  /** Filter matching one run event type for every run. */
  runEvents(type: RunEventType): string;
  /** Filter matching every event of one call. */
  oneCall(callId: string): string;
  readonly allCalls: string;
  readonly allRuns: string;
  /** Splits a subject of this catalogue into its parts, or returns undefined for any other subject. */
  parse(subject: string): { kind: "call" | "run"; id: string; type: string } | undefined;
}

/** Builds the catalogue for `prefix` (default `toolgate`); a per-test prefix isolates tests sharing one server. */
export function subjectCatalogue(prefix = "toolgate"): SubjectCatalogue {
  if (!/^[a-z][a-z0-9_-]{0,31}$/.test(prefix)) throw new TypeError(`invalid subject prefix: ${prefix}`);
  const token = (id: string): string => {
    if (!isSubjectSafe(id)) throw new TypeError(`id is not subject-safe: ${JSON.stringify(id)}`);
    return id;
  };
  return {
    prefix,
    stream: `${prefix.toUpperCase().replace(/-/g, "_")}_EVENTS`,
    call: (callId, type) => `${prefix}.call.${token(callId)}.${type}`,
    run: (runId, type) => `${prefix}.run.${token(runId)}.${type}`,
    callEvents: (type) => `${prefix}.call.*.${type}`,
    runEvents: (type) => `${prefix}.run.*.${type}`,
    oneCall: (callId) => `${prefix}.call.${token(callId)}.*`,
    allCalls: `${prefix}.call.>`,
    allRuns: `${prefix}.run.>`,
    parse(subject) {
      const parts = subject.split(".");
      if (parts.length !== 4 || parts[0] !== prefix) return undefined;
      const [, kind, id, type] = parts as [string, string, string, string];
      if (kind !== "call" && kind !== "run") return undefined;
      return { kind, id, type };
    },
  };
}
