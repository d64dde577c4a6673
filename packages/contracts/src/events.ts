import { z } from "zod";
import { CallIdSchema, RunIdSchema } from "./ids.js";
import { PrincipalSchema } from "./principal.js";
import { FailureResultSchema, JsonValueSchema, ResultEnvelopeSchema } from "./result-envelope.js";
import type { CallEventType, RunEventType } from "./subjects.js";

/** Name of the service that emitted an event. */
export const ServiceNameSchema = z.enum(["orchestrator", "policy", "executor", "audit"]);
export type ServiceName = z.infer<typeof ServiceNameSchema>;

/** `sha256:<hex>` digest. */
export const HashSchema = z.string().regex(/^sha256:[0-9a-f]{64}$/, "expected sha256:<hex>");

/** Identifies exactly which contract a call was validated against. */
export const ToolRefSchema = z.object({
  name: z.string().regex(/^[a-z][a-z0-9_]{0,63}$/),
  version: z.string().min(1).max(32),
  hash: HashSchema,
});
export type ToolRef = z.infer<typeof ToolRefSchema>;

/**
 * Trusted run context set when the run is created by an authenticated caller (never by the model):
 * e.g. the task a research run works on, which bounds where `save_evidence` may write.
 */
export const RunContextSchema = z.object({
  task_id: z
    .string()
    .min(1)
    .max(128)
    .regex(/^[A-Za-z0-9_-]+$/)
    .optional(),
});
export type RunContext = z.infer<typeof RunContextSchema>;

/** Upper bound on the raw argument text carried by a proposal; contracts set lower limits. */
export const MAX_ARGUMENTS_JSON_BYTES = 256 * 1024;

/**
 * The authorization policy signs. The executor runs nothing unless the signature verifies against a
 * trusted policy key and `args_hash` equals the hash of what it is about to run.
 */
export const DecisionSchema = z.object({
  decision_id: z.string().min(1).max(128),
  call_id: CallIdSchema,
  run_id: RunIdSchema,
  tool: ToolRefSchema,
  args_hash: HashSchema,
  principal: PrincipalSchema,
  context: RunContextSchema,
  policy_version: z.string().min(1).max(128),
  issued_at: z.iso.datetime(),
  expires_at: z.iso.datetime(),
  key_id: z.string().min(1).max(128),
  /** Present when a human approved this exact plan: the executor re-computes `plan_hash` and consumes the approval once. */
  approval: z.object({ approval_id: z.string().min(1).max(128), plan_hash: HashSchema }).optional(),
});
export type Decision = z.infer<typeof DecisionSchema>;

/**
 * A consumer's report of an event it refused because its signature did not show it to be its owner's (forged,
 * unsigned, or signed by a key of another role). Nothing acted on the refused event; the report changes no state.
 */
const EventRefusedSchema = z.object({
  refused_event_id: z.string().max(256),
  refused_type: z.string().max(64),
  /** The service the refused event claimed to come from. */
  claimed_source: z.string().max(64),
  reason: z.enum(["unsigned", "malformed_signature", "unknown_key", "bad_signature", "signer_not_owner", "source_not_signer"]),
  /** The key id its signature named, if it named one. */
  key_id: z.string().max(64).optional(),
  stream_seq: z.number().int().min(0),
  /** sha256 (hex) of the refused message's bytes. */
  digest: z.string().regex(/^[0-9a-f]{64}$/),
});

const callPayloads = {
  proposed: z.object({
    provider_call_id: z.string().min(1).max(256),
    tool_name: z.string().max(256),
    arguments_json: z.string().max(MAX_ARGUMENTS_JSON_BYTES),
    context: RunContextSchema,
    turn: z.number().int().min(0),
    /** Position of the call in the model's response (or the host's submission): its order among the turn's calls. */
    order: z.number().int().min(0).max(10_000).optional(),
    /**
     * How the orchestrator schedules the call: whether it writes (one write at a time per group, holding locks) and
     * the resources it locks (`<type>:<id>` from the contract's resource pointers), as derived when it was proposed.
     */
    write: z.boolean().optional(),
    resources: z.array(z.string().max(1024)).max(64).optional(),
    /**
     * Whether the run had already received output from a tool marked as returning untrusted content when
     * the model proposed this call (Meta's Rule of Two); `sources` names those tools.
     */
    taint: z.object({ tainted: z.boolean(), sources: z.array(z.string().max(64)).max(16) }).optional(),
  }),
  rejected: z.object({
    result: FailureResultSchema,
    stage: z.enum(["structural", "object", "state"]),
  }),
  denied: z.object({
    result: FailureResultSchema,
    reasons: z.array(z.string().max(512)).max(32),
    policy_version: z.string().max(128),
  }),
  approval_requested: z.object({
    approval_id: z.string().max(128),
    plan_hash: HashSchema,
    expires_at: z.iso.datetime(),
  }),
  approval_granted: z.object({
    approval_id: z.string().max(128),
    plan_hash: HashSchema,
    /** The human who approved: authenticated, holding the right to approve, never the requester. */
    approver: PrincipalSchema,
  }),
  authorized: z.object({
    decision: DecisionSchema,
    signature: z.string().min(1).max(512),
    arguments: z.record(z.string(), JsonValueSchema),
  }),
  started: z.object({
    executor_id: z.string().max(128),
    idempotency_key_hash: HashSchema,
  }),
  completed: z.object({
    result: ResultEnvelopeSchema,
    duration_ms: z.number().min(0),
    /**
     * What the downstream answered: its transport, the request id it gave (an HTTP `x-request-id` / `request-id`
     * header, an MCP result's `_meta` request id), and the sha256 of the tool's raw output before the executor
     * validated and normalized it into `result`.
     */
    downstream: z
      .object({
        transport: z.enum(["in_process", "http", "mcp"]),
        request_id: z.string().max(256).optional(),
        raw_output_hash: HashSchema.optional(),
      })
      .optional(),
  }),
  outcome_unknown: z.object({
    result: FailureResultSchema,
    duration_ms: z.number().min(0),
  }),
  refused: z.object({
    /** Why the executor refused an authorization; nothing ran. */
    reason: z.enum(["unknown_key", "bad_signature", "decision_for_another_call", "envelope_tool_mismatch", "arguments_not_bound", "approval_invalid"]),
    detail: z.string().max(512),
  }),
  retry_scheduled: z.object({
    /** The attempt that failed with a retryable error; the next one runs after `delay_ms`. */
    failed_attempt: z.number().int().min(1),
    code: z.string().max(64),
    delay_ms: z.number().int().min(0),
  }),
  operation_updated: z.object({
    operation_id: z.string().min(1).max(128),
    state: z.enum(["accepted", "running", "succeeded", "failed", "cancelled"]),
    result: ResultEnvelopeSchema.optional(),
  }),
  reconciled: z.object({
    /** What the tool's status check found out about an outcome that was unknown. */
    outcome: z.enum(["applied", "not_applied", "still_unknown"]),
    result: ResultEnvelopeSchema,
  }),
  dead_lettered: z.object({
    reason: z.string().max(512),
    deliveries: z.number().int().min(1),
  }),
  result_attached: z.object({
    provider_call_id: z.string().min(1).max(256),
    ok: z.boolean(),
  }),
  /**
   * The call's caller withdrew it (an MCP `tasks/cancel`) before it ended. Not terminal: policy withdraws the
   * call's approval request if one is still open (the call then ends `denied`); a call already authorized or
   * running is not stopped, and ends as it would have.
   */
  cancel_requested: z.object({
    reason: z.string().max(512),
  }),
  event_refused: EventRefusedSchema,
} satisfies Record<CallEventType, z.ZodType>;

/** The stop reasons that are budgets (a run used up what it was allowed); the others are outcomes of the run. */
export const BUDGET_STOP_REASONS = ["budget_turns", "budget_tool_calls", "budget_wall_clock", "budget_tokens", "repeated_call", "approval_timeout"] as const;

/** Why a run stopped: one of its budgets, the model's refusal or failure, or its owner's cancel. */
export const RunStopReasonSchema = z.enum([...BUDGET_STOP_REASONS, "refusal", "model_error", "cancelled"]);
export type RunStopReason = z.infer<typeof RunStopReasonSchema>;

/** Whether a run stopped because it used up a budget. */
export function isBudgetStop(reason: RunStopReason): boolean {
  return (BUDGET_STOP_REASONS as readonly string[]).includes(reason);
}

const runPayloads = {
  started: z.object({
    model: z.string().max(128),
    context: RunContextSchema,
    /** The user's request that started a managed run (a host-driven run has none): the head of the audit chain. */
    input: z
      .string()
      .max(64 * 1024)
      .optional(),
  }),
  model_responded: z.object({
    turn: z.number().int().min(0),
    outcome: z.enum(["tool_calls", "final", "refusal"]),
    tool_calls: z.number().int().min(0),
    /** The model snapshot the provider says answered (e.g. `gpt-4o-2024-08-06`), when it says. */
    model_version: z.string().max(128).optional(),
    /** Tokens the provider counted for this turn (input plus output), when it counts. */
    tokens: z.number().int().min(0).optional(),
  }),
  completed: z.object({
    turns: z.number().int().min(0),
    tool_calls: z.number().int().min(0),
    final_text: z.string().max(64 * 1024),
  }),
  stopped: z.object({
    reason: RunStopReasonSchema,
    message: z.string().max(2048),
  }),
  event_refused: EventRefusedSchema,
} satisfies Record<RunEventType, z.ZodType>;

/**
 * An event id (see {@link eventId}). It travels as the `Nats-Msg-Id` header and is audit's `_id`, so it is
 * restricted to characters that cannot break a header line or a key: no spaces, no control characters.
 */
export const EventIdSchema = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_:.-]{0,199}$/, "expected an event id (<call or run id>:<type>:<attempt>)");

const base = {
  v: z.literal(1),
  /** Deterministic (see {@link eventId}): a re-published transition keeps its id, so storage can deduplicate. */
  id: EventIdSchema,
  run_id: RunIdSchema,
  /** Position of the event in its call's (or run's) causal chain, starting at 1. */
  seq: z.number().int().min(1).max(1_000_000),
  attempt: z.number().int().min(1).max(10_000),
  time: z.iso.datetime(),
  source: ServiceNameSchema,
  principal: PrincipalSchema,
  tool: ToolRefSchema.optional(),
  args_hash: HashSchema.optional(),
};

function callEvent<T extends CallEventType>(type: T) {
  return z.object({ ...base, kind: z.literal("call"), call_id: CallIdSchema, type: z.literal(type), payload: callPayloads[type] });
}
function runEvent<T extends RunEventType>(type: T) {
  return z.object({ ...base, kind: z.literal("run"), type: z.literal(type), payload: runPayloads[type] });
}

/** Every call state transition, discriminated by `type`. */
export const CallEventSchema = z.discriminatedUnion("type", [
  callEvent("proposed"),
  callEvent("rejected"),
  callEvent("denied"),
  callEvent("approval_requested"),
  callEvent("approval_granted"),
  callEvent("authorized"),
  callEvent("started"),
  callEvent("completed"),
  callEvent("outcome_unknown"),
  callEvent("refused"),
  callEvent("retry_scheduled"),
  callEvent("operation_updated"),
  callEvent("reconciled"),
  callEvent("dead_lettered"),
  callEvent("result_attached"),
  callEvent("cancel_requested"),
  callEvent("event_refused"),
]);
export type CallEvent = z.infer<typeof CallEventSchema>;

/** Every run state transition, discriminated by `type`. */
export const RunEventSchema = z.discriminatedUnion("type", [
  runEvent("started"),
  runEvent("model_responded"),
  runEvent("completed"),
  runEvent("stopped"),
  runEvent("event_refused"),
]);
export type RunEvent = z.infer<typeof RunEventSchema>;

/** The one envelope for every event on the bus. */
export const ToolgateEventSchema = z.discriminatedUnion("kind", [CallEventSchema, RunEventSchema]);
export type ToolgateEvent = z.infer<typeof ToolgateEventSchema>;

/** The event of call type `T`. */
export type CallEventOf<T extends CallEventType> = Extract<CallEvent, { type: T }>;
/** The event of run type `T`. */
export type RunEventOf<T extends RunEventType> = Extract<RunEvent, { type: T }>;

/**
 * Deterministic event id for the transition `type` of call or run `id` at `attempt`. It doubles as the
 * JetStream `Nats-Msg-Id`, so a re-published transition is dropped by the duplicate window and by audit.
 */
export function eventId(id: string, type: string, attempt: number): string {
  return `${id}:${type}:${attempt}`;
}

/**
 * The id of `reporter`'s `event_refused` report of the message at `streamSeq`: unique to that message, so a
 * redelivered forgery is reported once, and never an id a transition uses.
 */
export function refusalEventId(chainId: string, reporter: ServiceName, streamSeq: number): string {
  return `${chainId}:event_refused:${reporter}.${streamSeq}`;
}
