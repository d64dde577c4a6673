import type { EventBus } from "@toolgate/bus";
import {
  CallIdSchema,
  RunIdSchema,
  ServiceNameSchema,
  TERMINAL_CALL_EVENT_TYPES,
  type CallEvent,
  type ResultEnvelope,
  type RunId,
  type SubjectCatalogue,
  type TerminalCallEventType,
  type ToolgateEvent,
} from "@toolgate/contracts";
import type { CompiledTool, ToolRegistry } from "@toolgate/registry";
import { z } from "zod";
import { apiComponents } from "./api-schemas.js";
import type { CallRecord, CallResultRecord, RunRecord, RunStore } from "./run-store.js";

/** The most calls a timeline shows (a run's latest); a host-driven run can hold more. */
export const TIMELINE_MAX_CALLS = 100;
/** The most events a timeline reads from the stream. */
export const TIMELINE_MAX_EVENTS = 4_000;
/**
 * How long after a record says something ended its event is still expected on the stream: the orchestrator
 * stores an attached outcome and a run's end before it publishes their events. Past this, a missing event is
 * taken as lost (its publisher died in between) and no longer keeps the timeline live.
 */
export const TIMELINE_SETTLE_MS = 30_000;

const TimeSchema = z.iso.datetime();

/** One event as the timeline shows it: what happened and when, never its payload (which holds the arguments). */
const TimelineEventSchema = z.object({
  type: z.string(),
  time: TimeSchema,
  seq: z.number().int(),
  attempt: z.number().int(),
  source: ServiceNameSchema,
  detail: z.string().optional().describe("a short summary: an error code, an approval id, an executor id, a retry's delay"),
});

const AttemptSchema = z.object({
  attempt: z.number().int().min(1),
  started_at: TimeSchema,
  ended_at: TimeSchema.optional(),
  outcome: z.string().optional().describe("ok, or the error code the attempt ended with"),
  executor_id: z.string(),
});

const CALL_STATUSES = ["proposed", "awaiting_approval", "authorized", "running", ...TERMINAL_CALL_EVENT_TYPES] as const;
type CallStatus = (typeof CALL_STATUSES)[number];

const TimelineCallSchema = z.object({
  call_id: CallIdSchema,
  provider_call_id: z.string(),
  tool: z.string(),
  turn: z.number().int(),
  status: z.enum(CALL_STATUSES).describe("where the call is: proposed, awaiting_approval, authorized, running, or the terminal event that ended it"),
  attached: z.boolean().describe("whether its outcome is attached (the model gets it)"),
  ok: z.boolean().optional(),
  error_code: z.string().optional(),
  error_message: z.string().optional(),
  proposed_at: TimeSchema,
  authorized_at: TimeSchema.optional(),
  approval: z
    .object({
      approval_id: z.string(),
      requested_at: TimeSchema,
      expires_at: TimeSchema,
      granted_at: TimeSchema.optional(),
    })
    .optional(),
  attempts: z.array(AttemptSchema),
  ended_at: TimeSchema.optional().describe("when its terminal event was published"),
  attached_at: TimeSchema.optional(),
  duration_ms: z.number().optional().describe("from its proposal to its attached outcome (or its terminal event)"),
  execution_ms: z.number().optional().describe("how long the tool ran, as the executor measured it"),
  arguments: z.unknown().optional().describe('the arguments, with every value the contract marks sensitive replaced by "[REDACTED]"'),
  arguments_hidden: z.boolean().describe("true when the arguments are not shown at all (their text fits no JSON, and the tool has sensitive fields)"),
  events: z.array(TimelineEventSchema),
  audit_path: z.string().describe("the call's trail on the audit API"),
  audit_url: z.string().optional().describe("the same, at ORCHESTRATOR_AUDIT_URL when it is set"),
});

/** `GET /v1/runs/{run_id}/timeline`: a run's turns and calls on a time axis, from its records and its events. */
export const TimelineSchema = z.object({
  run_id: RunIdSchema,
  status: z.enum(["running", "completed", "stopped", "external"]),
  model: z.string(),
  stop_reason: z.string().optional(),
  final_text: z.string().optional(),
  started_at: TimeSchema,
  ended_at: TimeSchema.optional(),
  server_time: TimeSchema,
  live: z
    .boolean()
    .describe("whether the run can still change: it is running, a call has no attached outcome yet, or the events of what just ended are still to come"),
  turns: z.array(
    z.object({
      turn: z.number().int(),
      responded_at: TimeSchema.optional(),
      outcome: z.string().optional(),
      call_ids: z.array(CallIdSchema),
    }),
  ),
  run_events: z.array(TimelineEventSchema),
  calls: z.array(TimelineCallSchema),
  truncated: z.boolean().describe(`true when the run has more than ${TIMELINE_MAX_CALLS} calls (the latest are shown) or more events than were read`),
  audit_path: z.string(),
  audit_url: z.string().optional(),
});
apiComponents.add(TimelineSchema, { id: "RunTimeline" });

export type Timeline = z.output<typeof TimelineSchema>;
type TimelineCall = Timeline["calls"][number];
type TimelineEvent = Timeline["run_events"][number];

/** The compiled tool a call is about: its exact version when its hash is known, else the current one of its name. */
export type ToolLookup = (name: string, hash?: string) => CompiledTool | undefined;

/** What a timeline is built from: the run's records, its calls' outcomes and every event the stream holds for them. */
export interface TimelineInput {
  run: RunRecord;
  calls: readonly CallRecord[];
  results: readonly CallResultRecord[];
  events: readonly ToolgateEvent[];
  truncated: boolean;
  tools: ToolLookup;
  auditUrl?: string;
  now: Date;
}

const iso = (d: Date) => d.toISOString();
const ms = (from: string, to: string) => Date.parse(to) - Date.parse(from);
const isTerminal = (type: string): type is TerminalCallEventType => (TERMINAL_CALL_EVENT_TYPES as readonly string[]).includes(type);

/** A short, data-free summary of an event for people: codes, ids and counts, never arguments or tool data. */
export function eventDetail(event: ToolgateEvent): string | undefined {
  if (event.kind === "run") {
    switch (event.type) {
      case "started":
        return `model ${event.payload.model}`;
      case "model_responded":
        return `turn ${event.payload.turn}: ${event.payload.outcome}, ${event.payload.tool_calls} tool call(s)`;
      case "completed":
        return `${event.payload.turns} turn(s), ${event.payload.tool_calls} tool call(s)`;
      case "stopped":
        return event.payload.reason;
      case "event_refused":
        return `refused ${event.payload.refused_type} (${event.payload.reason})`;
    }
  }
  switch (event.type) {
    case "proposed":
      return `turn ${event.payload.turn}`;
    case "rejected":
    case "denied":
    case "outcome_unknown":
    case "completed":
      return event.payload.result.ok ? "ok" : event.payload.result.error.code;
    case "approval_requested":
      return `approval ${event.payload.approval_id}`;
    case "approval_granted":
      return `by ${event.payload.approver.tenant}/${event.payload.approver.subject}`;
    case "authorized":
      return event.payload.decision.approval
        ? `approved plan, policy ${event.payload.decision.policy_version}`
        : `policy ${event.payload.decision.policy_version}`;
    case "started":
      return `executor ${event.payload.executor_id}`;
    case "retry_scheduled":
      return `attempt ${event.payload.failed_attempt} failed: ${event.payload.code}; next in ${event.payload.delay_ms} ms`;
    case "refused":
      return event.payload.reason;
    case "dead_lettered":
      return `after ${event.payload.deliveries} deliveries`;
    case "operation_updated":
      return `operation ${event.payload.operation_id}: ${event.payload.state}`;
    case "reconciled":
      return event.payload.outcome;
    case "result_attached":
      return event.payload.ok ? "ok" : "error";
    case "cancel_requested":
      return event.payload.reason;
    case "event_refused":
      return `refused ${event.payload.refused_type} (${event.payload.reason})`;
  }
}

function shown(event: ToolgateEvent): TimelineEvent {
  const detail = eventDetail(event);
  return { type: event.type, time: event.time, seq: event.seq, attempt: event.attempt, source: event.source, ...(detail === undefined ? {} : { detail }) };
}

/** Events in their chain's order (a chain's `seq`), the stream's order breaking ties. */
function inChainOrder<T extends ToolgateEvent>(events: readonly T[]): T[] {
  return events
    .map((e, i) => ({ e, i }))
    .sort((a, b) => a.e.seq - b.e.seq || a.i - b.i)
    .map(({ e }) => e);
}

/**
 * The arguments as people may see them: the authorized (normalized) arguments redacted by the exact contract
 * version, else the proposed text redacted by the tool's current contract, as audit stores them.
 */
function visibleArguments(call: CallRecord, events: readonly CallEvent[], tools: ToolLookup): { arguments?: unknown; hidden: boolean } {
  const authorized = events.find((e): e is Extract<CallEvent, { type: "authorized" }> => e.type === "authorized");
  if (authorized) {
    const tool = tools(authorized.payload.decision.tool.name, authorized.payload.decision.tool.hash);
    const args = authorized.payload.arguments;
    if (tool) return { arguments: tool.redactArguments(args), hidden: false };
  }
  const tool = tools(call.tool_name);
  let parsed: unknown;
  try {
    parsed = JSON.parse(call.arguments_json);
  } catch {
    return tool?.redacts.arguments ? { hidden: true } : { arguments: call.arguments_json, hidden: false };
  }
  if (!tool?.redacts.arguments) return { arguments: parsed, hidden: false };
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return { hidden: true };
  return { arguments: tool.redactArguments(parsed as Record<string, never>), hidden: false };
}

function callRow(call: CallRecord, result: CallResultRecord | undefined, own: readonly CallEvent[], input: TimelineInput): TimelineCall {
  const events = inChainOrder(own);
  const first = <T extends CallEvent["type"]>(type: T) => events.find((e): e is Extract<CallEvent, { type: T }> => e.type === type);
  const proposed = first("proposed");
  const authorized = first("authorized");
  const requested = first("approval_requested");
  const granted = first("approval_granted");
  const attachedEvent = first("result_attached");
  const terminal = events.find((e) => isTerminal(e.type)) as Extract<CallEvent, { type: TerminalCallEventType }> | undefined;

  const attempts: TimelineCall["attempts"] = [];
  for (const e of events) {
    if (e.type === "started" && !attempts.some((a) => a.attempt === e.attempt))
      attempts.push({ attempt: e.attempt, started_at: e.time, executor_id: e.payload.executor_id });
    if (e.type === "retry_scheduled") {
      const failed = attempts.find((a) => a.attempt === e.payload.failed_attempt);
      if (failed && failed.ended_at === undefined) Object.assign(failed, { ended_at: e.time, outcome: e.payload.code });
    }
  }
  attempts.sort((a, b) => a.attempt - b.attempt);
  if (terminal && (terminal.type === "completed" || terminal.type === "outcome_unknown")) {
    // The attempt that ended the call (a replayed result may name one that did not start here: the last one).
    const last = attempts.find((a) => a.attempt === terminal.attempt) ?? attempts.at(-1);
    if (last && last.ended_at === undefined)
      Object.assign(last, { ended_at: terminal.time, outcome: terminal.payload.result.ok ? "ok" : terminal.payload.result.error.code });
  }

  const outcome: ResultEnvelope | undefined = result?.result ?? terminal?.payload.result;
  const status: CallStatus =
    result?.terminal ??
    terminal?.type ??
    (attempts.length > 0 ? "running" : authorized ? "authorized" : requested && !granted ? "awaiting_approval" : "proposed");
  const proposedAt = proposed?.time ?? iso(call.created_at);
  // The trail's `result_attached` when it is there (the model's answer waits for it), else the record's time.
  const attachedAt = attachedEvent?.time ?? (result ? iso(result.attached_at) : undefined);
  const endedAt = terminal?.time;
  const until = attachedAt ?? endedAt;
  const execution = terminal && (terminal.type === "completed" || terminal.type === "outcome_unknown") ? terminal.payload.duration_ms : undefined;
  const args = visibleArguments(call, events, input.tools);
  const auditPath = `/v1/calls/${call._id}/events`;
  return {
    call_id: call._id,
    provider_call_id: call.provider_call_id,
    tool: call.tool_name,
    turn: call.turn,
    status,
    attached: attachedAt !== undefined,
    ...(outcome ? { ok: outcome.ok } : {}),
    ...(outcome && !outcome.ok ? { error_code: outcome.error.code, error_message: outcome.error.message } : {}),
    proposed_at: proposedAt,
    ...(authorized ? { authorized_at: authorized.time } : {}),
    ...(requested
      ? {
          approval: {
            approval_id: requested.payload.approval_id,
            requested_at: requested.time,
            expires_at: requested.payload.expires_at,
            ...(granted ? { granted_at: granted.time } : {}),
          },
        }
      : {}),
    attempts,
    ...(endedAt ? { ended_at: endedAt } : {}),
    ...(attachedAt ? { attached_at: attachedAt } : {}),
    ...(until ? { duration_ms: Math.max(0, ms(proposedAt, until)) } : {}),
    ...(execution === undefined ? {} : { execution_ms: execution }),
    ...(args.arguments === undefined ? {} : { arguments: args.arguments }),
    arguments_hidden: args.hidden,
    events: events.map(shown),
    audit_path: auditPath,
    ...(input.auditUrl ? { audit_url: `${input.auditUrl}${auditPath}` } : {}),
  };
}

/** Builds a run's timeline from its records and events (pure: the store and the stream are read by {@link RunTimeline}). */
export function assembleTimeline(input: TimelineInput): Timeline {
  const { run } = input;
  const byCall = new Map<string, CallEvent[]>();
  const runEvents: ToolgateEvent[] = [];
  for (const event of input.events) {
    if (event.run_id !== run._id) continue;
    if (event.kind === "run") runEvents.push(event);
    else byCall.set(event.call_id, [...(byCall.get(event.call_id) ?? []), event]);
  }
  const results = new Map(input.results.map((r) => [r._id, r]));
  const calls = input.calls.map((c) => callRow(c, results.get(c._id), byCall.get(c._id) ?? [], input));
  const recent = (d: Date) => input.now.getTime() - d.getTime() < TIMELINE_SETTLE_MS;
  // An outcome stored but whose `result_attached` is not on the stream yet (it is published right after).
  const attaching = input.calls.some((c) => {
    const stored = results.get(c._id);
    return stored !== undefined && recent(stored.attached_at) && !(byCall.get(c._id) ?? []).some((e) => e.type === "result_attached");
  });
  const orderedRunEvents = inChainOrder(runEvents);
  const started = orderedRunEvents.find((e) => e.type === "started");
  const ended = orderedRunEvents.find((e) => e.type === "completed" || e.type === "stopped");
  const turns = new Map<number, Timeline["turns"][number]>();
  const turn = (n: number) => turns.get(n) ?? turns.set(n, { turn: n, call_ids: [] }).get(n)!;
  for (const e of orderedRunEvents) if (e.type === "model_responded") Object.assign(turn(e.payload.turn), { responded_at: e.time, outcome: e.payload.outcome });
  for (const c of calls) turn(c.turn).call_ids.push(c.call_id);
  const auditPath = `/v1/runs/${run._id}/events`;
  return {
    run_id: run._id,
    status: run.status,
    model: run.model,
    ...(run.stop_reason === undefined ? {} : { stop_reason: run.stop_reason }),
    ...(run.final_text ? { final_text: run.final_text } : {}),
    started_at: started?.time ?? iso(run.created_at),
    ...(ended ? { ended_at: ended.time } : {}),
    server_time: iso(input.now),
    live:
      run.status === "running" ||
      calls.some((c) => !c.attached) ||
      attaching ||
      ((run.status === "completed" || run.status === "stopped") && !ended && recent(run.updated_at)),
    turns: [...turns.values()].sort((a, b) => a.turn - b.turn),
    run_events: orderedRunEvents.map(shown),
    calls,
    truncated: input.truncated,
    audit_path: auditPath,
    ...(input.auditUrl ? { audit_url: `${input.auditUrl}${auditPath}` } : {}),
  };
}

export interface RunTimelineDeps {
  store: Pick<RunStore, "callsAndResultsOf">;
  /** Calls this replica proposed whose records are written with their outcomes. */
  loop: { unrecordedCalls(runId: RunId): CallRecord[] };
  bus: Pick<EventBus, "history">;
  subjects: SubjectCatalogue;
  contracts: { registry(): ToolRegistry };
  /** The audit API as the people who read the page reach it (`ORCHESTRATOR_AUDIT_URL`): each trail is linked there. */
  auditUrl?: string;
}

/** Reads what a run's timeline is built from: its records in the store and its events in the stream. */
export class RunTimeline {
  readonly #deps: RunTimelineDeps;

  constructor(deps: RunTimelineDeps) {
    this.#deps = deps;
  }

  /** The run's timeline now. Throws when the store or the stream cannot be read (retryable). */
  async of(run: RunRecord): Promise<Timeline> {
    const { store, loop, bus, subjects, contracts } = this.#deps;
    const { calls: stored, results } = await store.callsAndResultsOf(run._id);
    const known = new Set(stored.map((c) => c._id));
    const all = [...stored, ...loop.unrecordedCalls(run._id).filter((c) => !known.has(c._id))].sort(
      (a, b) => a.created_at.getTime() - b.created_at.getTime() || a.order - b.order,
    );
    const calls = all.slice(-TIMELINE_MAX_CALLS);
    const history = await bus.history([`${subjects.prefix}.run.${run._id}.*`, ...calls.map((c) => subjects.oneCall(c._id))], TIMELINE_MAX_EVENTS);
    const registry = contracts.registry();
    return assembleTimeline({
      run,
      calls,
      results,
      events: history.events,
      truncated: history.truncated || all.length > calls.length,
      tools: (name, hash) => (hash ? registry.getByHash(hash) : undefined) ?? registry.get(name),
      ...(this.#deps.auditUrl ? { auditUrl: this.#deps.auditUrl.replace(/\/+$/, "") } : {}),
      now: new Date(),
    });
  }
}
