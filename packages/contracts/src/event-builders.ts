import { eventId, type CallEvent, type CallEventOf, type RunEventOf, type ServiceName, type ToolRef } from "./events.js";
import type { Principal } from "./principal.js";
import type { CallEventType, RunEventType } from "./subjects.js";

/** What a new call event inherits from the event it reacts to (or, for `proposed`, from the run). */
export interface CallEventOrigin {
  call_id: string;
  run_id: string;
  principal: Principal;
  /** Sequence of the event this one follows; the new event gets `seq + 1` (0 for the first event). */
  seq: number;
  tool?: ToolRef;
  args_hash?: string;
}

/**
 * Builds the call event `type` following `origin`, with its deterministic id, so that re-publishing the
 * same transition is deduplicated by JetStream and by audit.
 */
export function nextCallEvent<T extends CallEventType>(
  origin: CallEventOrigin,
  type: T,
  source: ServiceName,
  payload: CallEventOf<T>["payload"],
  options: { attempt?: number; tool?: ToolRef; args_hash?: string; time?: Date } = {},
): CallEventOf<T> {
  const attempt = options.attempt ?? 1;
  const tool = options.tool ?? origin.tool;
  const argsHash = options.args_hash ?? origin.args_hash;
  return {
    v: 1,
    kind: "call",
    id: eventId(origin.call_id, type, attempt),
    type,
    call_id: origin.call_id,
    run_id: origin.run_id,
    seq: origin.seq + 1,
    attempt,
    time: (options.time ?? new Date()).toISOString(),
    source,
    principal: origin.principal,
    ...(tool ? { tool } : {}),
    ...(argsHash ? { args_hash: argsHash } : {}),
    payload,
  } as CallEventOf<T>;
}

/** The origin of events that follow `event`. */
export function originOf(event: CallEvent): CallEventOrigin {
  return {
    call_id: event.call_id,
    run_id: event.run_id,
    principal: event.principal,
    seq: event.seq,
    ...(event.tool ? { tool: event.tool } : {}),
    ...(event.args_hash ? { args_hash: event.args_hash } : {}),
  };
}

/** Builds run event `type` number `n` (the run's turn or a counter), deterministic like call events. */
export function runEvent<T extends RunEventType>(
  run: { run_id: string; principal: Principal },
  type: T,
  source: ServiceName,
  n: number,
  payload: RunEventOf<T>["payload"],
  time = new Date(),
): RunEventOf<T> {
  return {
    v: 1,
    kind: "run",
    id: eventId(run.run_id, type, n),
    type,
    run_id: run.run_id,
    seq: n + 1,
    attempt: 1,
    time: time.toISOString(),
    source,
    principal: run.principal,
    payload,
  } as RunEventOf<T>;
}
