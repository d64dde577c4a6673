import { describe, expect, it } from "vitest";
import { CallEventSchema, eventId, RunEventSchema, ToolgateEventSchema } from "./events.js";
import { newCallId, newRunId } from "./ids.js";
import { parseEvent } from "./parse-event.js";
import { failure, success } from "./result-envelope.js";
import { CALL_EVENT_TYPES, RUN_EVENT_TYPES, type CallEventType, type RunEventType } from "./subjects.js";

const encoder = new TextEncoder();
const hash = (c: string): string => `sha256:${c.repeat(64)}`;
const principal = { tenant: "acme", subject: "alice", roles: ["analyst"] };
const tool = { name: "create_ticket", version: "1", hash: hash("a") };

function callPayloads(callId: string, runId: string): Record<CallEventType, unknown> {
  return {
    proposed: { provider_call_id: "call_abc.def*>", tool_name: "create_ticket", arguments_json: "{}", context: {}, turn: 0 },
    rejected: { result: failure(callId, "INVALID_ARGUMENTS", "bad"), stage: "structural" },
    denied: { result: failure(callId, "PERMISSION_DENIED", "no"), reasons: [], policy_version: "p1" },
    approval_requested: { approval_id: "apr_1", plan_hash: hash("c"), expires_at: "2024-11-29T11:00:00.000Z" },
    authorized: {
      decision: {
        decision_id: "dec_1",
        call_id: callId,
        run_id: runId,
        tool,
        args_hash: hash("b"),
        principal,
        context: {},
        policy_version: "p1",
        issued_at: "2024-11-29T10:00:00.000Z",
        expires_at: "2024-11-29T10:05:00.000Z",
        key_id: "k1",
      },
      signature: "sig",
      arguments: { title: "x" },
    },
    started: { executor_id: "executor-1", idempotency_key_hash: hash("d") },
    completed: { result: success(callId, []), duration_ms: 3 },
    outcome_unknown: { result: failure(callId, "OUTCOME_UNKNOWN", "maybe"), duration_ms: 3 },
    approval_granted: { approval_id: "apr_1", plan_hash: hash("c"), approver: { tenant: "acme", subject: "bob", roles: ["approver"] } },
    refused: { reason: "bad_signature", detail: "not signed by a trusted key" },
    retry_scheduled: { failed_attempt: 1, code: "UPSTREAM_UNAVAILABLE", delay_ms: 250 },
    operation_updated: { operation_id: "op_1", state: "running" },
    reconciled: { outcome: "not_applied", result: failure(callId, "OUTCOME_UNKNOWN", "not applied") },
    dead_lettered: { reason: "poison", deliveries: 10 },
    result_attached: { provider_call_id: "call_abc", ok: true },
    cancel_requested: { reason: "cancelled by the caller" },
    event_refused: refusedPayload,
  };
}

const refusedPayload = {
  refused_event_id: "c:completed:1",
  refused_type: "completed",
  claimed_source: "executor",
  reason: "bad_signature",
  key_id: "0123456789abcdef",
  stream_seq: 7,
  digest: "e".repeat(64),
};

const runPayloads: Record<RunEventType, unknown> = {
  started: { model: "m", context: { task_id: "task-1" } },
  model_responded: { turn: 1, outcome: "final", tool_calls: 0 },
  completed: { turns: 1, tool_calls: 0, final_text: "" },
  stopped: { reason: "cancelled", message: "stopped by the user" },
  event_refused: refusedPayload,
};

function envelope(kind: "call" | "run", id: string, runId: string, type: string, payload: unknown): Record<string, unknown> {
  return {
    v: 1,
    id: eventId(id, type, 1),
    kind,
    type,
    ...(kind === "call" ? { call_id: id } : {}),
    run_id: runId,
    seq: 1,
    attempt: 1,
    time: "2024-11-29T10:00:00.000Z",
    source: "orchestrator",
    principal,
    payload,
  };
}

describe("event envelope", () => {
  const callId = newCallId();
  const runId = newRunId();
  const calls = callPayloads(callId, runId);

  it("has a payload example for every call and run event type", () => {
    expect(Object.keys(calls).sort()).toEqual([...CALL_EVENT_TYPES].sort());
    expect(Object.keys(runPayloads).sort()).toEqual([...RUN_EVENT_TYPES].sort());
  });

  it.each(CALL_EVENT_TYPES)("parses a valid call event of type %s", (type) => {
    const json = envelope("call", callId, runId, type, calls[type]);
    const parsed = parseEvent(encoder.encode(JSON.stringify(json)), 1 << 20);
    expect(parsed).toEqual({ ok: true, event: json });
    expect(CallEventSchema.safeParse(json).success).toBe(true);
  });

  it.each(RUN_EVENT_TYPES)("parses a valid run event of type %s", (type) => {
    const json = envelope("run", runId, runId, type, runPayloads[type]);
    const parsed = parseEvent(encoder.encode(JSON.stringify(json)), 1 << 20);
    expect(parsed).toEqual({ ok: true, event: json });
    expect(RunEventSchema.safeParse(json).success).toBe(true);
  });

  it("keeps call and run payloads of the same type name apart", () => {
    // `started` and `completed` exist for both kinds with different payloads.
    expect(ToolgateEventSchema.safeParse(envelope("call", callId, runId, "started", runPayloads.started)).success).toBe(false);
    expect(ToolgateEventSchema.safeParse(envelope("run", runId, runId, "started", calls.started)).success).toBe(false);
    expect(ToolgateEventSchema.safeParse(envelope("run", runId, runId, "completed", calls.completed)).success).toBe(false);
  });

  it("derives deterministic event ids that are valid envelope ids", () => {
    expect(eventId(callId, "completed", 2)).toBe(`${callId}:completed:2`);
    expect(eventId(callId, "completed", 2)).toBe(eventId(callId, "completed", 2));
    expect(eventId(callId, "completed", 2)).not.toBe(eventId(callId, "completed", 3));
  });

  it("generates ids that sort by creation time and never repeat", () => {
    const ids = Array.from({ length: 1_000 }, () => newCallId());
    expect(new Set(ids).size).toBe(ids.length);
    expect([...ids].sort()).toEqual(ids);
  });
});
