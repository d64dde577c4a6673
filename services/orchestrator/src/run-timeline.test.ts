import { eventId, failure, newCallId, newRunId, success, ToolgateEventSchema, type ToolgateEvent } from "@toolgate/contracts";
import { ToolRegistry, type ToolContractInput } from "@toolgate/registry";
import { describe, expect, it } from "vitest";
import type { CallRecord, CallResultRecord, RunRecord } from "./run-store.js";
import { assembleTimeline, TimelineSchema, type TimelineInput } from "./run-timeline.js";

// The timeline's assembly alone: which phase each event opens or closes, what is shown of the arguments.
const SECRET = "4111111111111111";
const PAYMENT: ToolContractInput = {
  name: "charge_card",
  version: "1.0.0",
  owner: "payments",
  description: "Charges a card. Use it only when the customer asked to pay; do not use it for refunds.",
  input_schema: {
    type: "object",
    properties: { amount: { type: "integer", minimum: 1, maximum: 1000 }, card: { type: "string", maxLength: 32 } },
    required: ["amount", "card"],
    additionalProperties: false,
  },
  output_schema: { type: "object" },
  side_effect: "external",
  risk: "medium",
  approval: "always",
  idempotency: { kind: "natural" },
  timeout_ms: 5_000,
  sensitive: ["/card"],
};
const registry = ToolRegistry.from([PAYMENT]);
const tool = registry.get("charge_card")!;
const tools: TimelineInput["tools"] = (name, hash) => (hash ? registry.getByHash(hash) : undefined) ?? registry.get(name);
const principal = { tenant: "acme", subject: "alice", roles: [] };
const T0 = Date.parse("2026-01-05T10:00:00.000Z");
const at = (ms: number) => new Date(T0 + ms).toISOString();

function runRecord(status: RunRecord["status"] = "running"): RunRecord {
  return {
    _id: newRunId(),
    principal,
    model: "scripted:c04",
    context: {},
    input: "",
    status,
    turn: 0,
    awaiting: "tools",
    responses: [],
    tool_calls: 1,
    budgets: { max_turns: 10, max_tool_calls: 10, max_wall_clock_ms: 60_000, max_tokens: 1000, max_identical_calls: 3, max_approval_wait_ms: 60_000 },
    usage: { turns: 1, tool_calls: 1, tokens: 0, signatures: {} },
    created_at: new Date(T0),
    updated_at: new Date(T0),
  };
}

function callRecord(runId: string, args: string, turn = 0, toolName = "charge_card"): CallRecord {
  return {
    _id: newCallId(),
    run_id: runId,
    turn,
    provider_call_id: "toolu_1",
    tool_name: toolName,
    arguments_json: args,
    order: 0,
    write: true,
    resources: [],
    signature: "s",
    taint: { tainted: false, sources: [] },
    created_at: new Date(T0 + 10),
  };
}

/** A call event as the stream holds it, parsed by the real schema (a bad fixture fails here, not in the code under test). */
function callEvent(call: CallRecord, type: string, seq: number, ms: number, payload: unknown, attempt = 1): ToolgateEvent {
  const source = ["proposed", "result_attached"].includes(type)
    ? "orchestrator"
    : ["rejected", "denied", "approval_requested", "approval_granted", "authorized"].includes(type)
      ? "policy"
      : "executor";
  return ToolgateEventSchema.parse({
    v: 1,
    id: eventId(call._id, type, attempt),
    kind: "call",
    type,
    call_id: call._id,
    run_id: call.run_id,
    seq,
    attempt,
    time: at(ms),
    source,
    principal,
    ...(type === "proposed" ? {} : { tool: tool.ref, args_hash: `sha256:${"b".repeat(64)}` }),
    payload,
  });
}

function runEvent(runId: string, type: string, seq: number, ms: number, payload: unknown): ToolgateEvent {
  return ToolgateEventSchema.parse({
    v: 1,
    id: eventId(runId, type, 1),
    kind: "run",
    type,
    run_id: runId,
    seq,
    attempt: 1,
    time: at(ms),
    source: "orchestrator",
    principal,
    payload,
  });
}

const hash = `sha256:${"c".repeat(64)}`;
function authorizedPayload(call: CallRecord, args: Record<string, unknown>) {
  return {
    decision: {
      decision_id: "d1",
      call_id: call._id,
      run_id: call.run_id,
      tool: tool.ref,
      args_hash: hash,
      principal,
      context: {},
      policy_version: "pv1",
      issued_at: at(0),
      expires_at: at(60_000),
      key_id: "k1",
      approval: { approval_id: "apr_1", plan_hash: hash },
    },
    signature: "sig",
    arguments: args,
  };
}

describe("assembleTimeline", () => {
  it("places each phase of a call: policy, approval wait, attempts with their outcomes, completion and attachment", () => {
    const run = runRecord("completed");
    const args = { amount: 12, card: SECRET };
    const call = callRecord(run._id, JSON.stringify(args));
    const events = [
      runEvent(run._id, "started", 1, 0, { model: "scripted:c04", context: {} }),
      callEvent(call, "proposed", 1, 20, { provider_call_id: "toolu_1", tool_name: "charge_card", arguments_json: call.arguments_json, context: {}, turn: 0 }),
      runEvent(run._id, "model_responded", 2, 15, { turn: 0, outcome: "tool_calls", tool_calls: 1 }),
      callEvent(call, "approval_requested", 2, 40, { approval_id: "apr_1", plan_hash: hash, expires_at: at(600_000) }),
      callEvent(call, "approval_granted", 3, 5_040, { approval_id: "apr_1", plan_hash: hash, approver: { tenant: "acme", subject: "carol", roles: [] } }),
      // Stream order is not chain order: a later attempt's `started` may be stored before the earlier retry.
      callEvent(call, "started", 6, 5_600, { executor_id: "x2", idempotency_key_hash: hash }, 2),
      callEvent(call, "authorized", 4, 5_050, authorizedPayload(call, args)),
      callEvent(call, "started", 5, 5_100, { executor_id: "x1", idempotency_key_hash: hash }, 1),
      callEvent(call, "retry_scheduled", 6, 5_300, { failed_attempt: 1, code: "UPSTREAM_UNAVAILABLE", delay_ms: 250 }, 1),
      callEvent(call, "completed", 7, 5_900, { result: success(call._id, { charged: true }), duration_ms: 280 }, 2),
      callEvent(call, "result_attached", 8, 5_950, { provider_call_id: "toolu_1", ok: true }, 2),
      runEvent(run._id, "completed", 3, 6_000, { turns: 1, tool_calls: 1, final_text: "done" }),
      // Another run's events are not this run's.
      runEvent(newRunId(), "started", 1, 1, { model: "m", context: {} }),
    ];
    const result: CallResultRecord = {
      _id: call._id,
      run_id: run._id,
      turn: 0,
      provider_call_id: "toolu_1",
      tool_name: "charge_card",
      terminal: "completed",
      result: success(call._id, { charged: true }),
      attached_at: new Date(T0 + 5_960),
    };
    const timeline = assembleTimeline({ run, calls: [call], results: [result], events, truncated: false, tools, now: new Date(T0 + 7_000) });

    expect(TimelineSchema.safeParse(timeline).success).toBe(true);
    expect(timeline).toMatchObject({ status: "completed", started_at: at(0), ended_at: at(6_000), live: false });
    expect(timeline.turns).toEqual([{ turn: 0, responded_at: at(15), outcome: "tool_calls", call_ids: [call._id] }]);
    expect(timeline.run_events.map((e) => e.type)).toEqual(["started", "model_responded", "completed"]);
    const [row] = timeline.calls;
    expect(row).toMatchObject({
      status: "completed",
      attached: true,
      ok: true,
      proposed_at: at(20),
      authorized_at: at(5_050),
      approval: { approval_id: "apr_1", requested_at: at(40), expires_at: at(600_000), granted_at: at(5_040) },
      ended_at: at(5_900),
      attached_at: at(5_950),
      duration_ms: 5_930,
      execution_ms: 280,
    });
    expect(row!.attempts).toEqual([
      { attempt: 1, started_at: at(5_100), ended_at: at(5_300), outcome: "UPSTREAM_UNAVAILABLE", executor_id: "x1" },
      { attempt: 2, started_at: at(5_600), ended_at: at(5_900), outcome: "ok", executor_id: "x2" },
    ]);
    expect(row!.events.map((e) => `${e.type}:${e.attempt}`)).toEqual([
      "proposed:1",
      "approval_requested:1",
      "approval_granted:1",
      "authorized:1",
      "started:1",
      "started:2",
      "retry_scheduled:1",
      "completed:2",
      "result_attached:2",
    ]);
    expect(row!.events.find((e) => e.type === "retry_scheduled")!.detail).toBe("attempt 1 failed: UPSTREAM_UNAVAILABLE; next in 250 ms");
    expect(row!.events.find((e) => e.type === "approval_granted")!.detail).toBe("by acme/carol");
    // The normalized arguments, the sensitive one redacted; nothing of any payload otherwise.
    expect(row!.arguments).toEqual({ amount: 12, card: "[REDACTED]" });
    expect(JSON.stringify(timeline)).not.toContain(SECRET);
    expect(row!.audit_path).toBe(`/v1/calls/${call._id}/events`);
    expect(row!.audit_url).toBeUndefined();
  });

  it("says where a call still is, and keeps the run live while any outcome is not attached", () => {
    const run = runRecord("external");
    const proposedOnly = callRecord(run._id, "{}");
    const waiting = callRecord(run._id, "{}");
    const authorized = callRecord(run._id, JSON.stringify({ amount: 1, card: SECRET }));
    const running = callRecord(run._id, "{}");
    const ended = callRecord(run._id, "{}");
    const proposed = (c: CallRecord) =>
      callEvent(c, "proposed", 1, 20, { provider_call_id: "toolu_1", tool_name: "charge_card", arguments_json: c.arguments_json, context: {}, turn: 0 });
    const events = [
      proposed(proposedOnly),
      proposed(waiting),
      callEvent(waiting, "approval_requested", 2, 40, { approval_id: "apr_2", plan_hash: hash, expires_at: at(60_000) }),
      proposed(authorized),
      callEvent(authorized, "authorized", 2, 50, authorizedPayload(authorized, { amount: 1, card: SECRET })),
      proposed(running),
      callEvent(running, "authorized", 2, 50, authorizedPayload(running, { amount: 1, card: SECRET })),
      callEvent(running, "started", 3, 60, { executor_id: "x1", idempotency_key_hash: hash }),
      proposed(ended),
      callEvent(ended, "denied", 2, 30, { result: failure(ended._id, "PERMISSION_DENIED", "not allowed"), reasons: [], policy_version: "pv1" }),
    ];
    const input = { run, calls: [proposedOnly, waiting, authorized, running, ended], results: [], events, truncated: false, tools, now: new Date(T0 + 100) };
    const timeline = assembleTimeline(input);
    expect(timeline.calls.map((c) => c.status)).toEqual(["proposed", "awaiting_approval", "authorized", "running", "denied"]);
    expect(timeline.live).toBe(true);
    const denied = timeline.calls[4]!;
    expect(denied).toMatchObject({
      ok: false,
      error_code: "PERMISSION_DENIED",
      error_message: "not allowed",
      attached: false,
      ended_at: at(30),
      duration_ms: 10,
    });
    expect(timeline.calls[3]!.attempts).toEqual([{ attempt: 1, started_at: at(60), executor_id: "x1" }]);
    expect(timeline.calls[0]!.duration_ms).toBeUndefined();
    expect(JSON.stringify(timeline)).not.toContain(SECRET);
    // An ended host-driven run whose outcomes are all attached is not live.
    const all = assembleTimeline({
      ...input,
      calls: [ended],
      events: [...events, callEvent(ended, "result_attached", 3, 35, { provider_call_id: "toolu_1", ok: false })],
    });
    expect(all.live).toBe(false);
  });

  it("stays live until the stream holds the events of what the records say has ended", () => {
    const run = { ...runRecord("completed"), updated_at: new Date(T0 + 1_000) };
    const call = callRecord(run._id, "{}");
    const result: CallResultRecord = {
      _id: call._id,
      run_id: run._id,
      turn: 0,
      provider_call_id: "toolu_1",
      tool_name: "charge_card",
      terminal: "completed",
      result: success(call._id, {}),
      attached_at: new Date(T0 + 900),
    };
    const attached = callEvent(call, "result_attached", 5, 950, { provider_call_id: "toolu_1", ok: true });
    const end = runEvent(run._id, "completed", 3, 1_000, { turns: 1, tool_calls: 1, final_text: "done" });
    const soon = new Date(T0 + 2_000);
    const timeline = (events: ToolgateEvent[], now = soon) => assembleTimeline({ run, calls: [call], results: [result], events, truncated: false, tools, now });
    // The outcome is stored, and the run's end: their events are published right after.
    expect(timeline([]).live).toBe(true);
    expect(timeline([attached]).live).toBe(true);
    expect(timeline([end]).live).toBe(true);
    expect(timeline([attached, end]).live).toBe(false);
    // Events that never came (their publisher died in between) stop being waited for.
    expect(timeline([], new Date(T0 + 60_000)).live).toBe(false);
  });

  it("shows proposed arguments redacted by the tool's contract, hides unreadable ones of a tool with secrets, and links the audit trail", () => {
    const run = runRecord();
    const readable = callRecord(run._id, JSON.stringify({ amount: 5, card: SECRET, extra: true }));
    const unreadable = callRecord(run._id, `{"card": "${SECRET}", `);
    const unknown = callRecord(run._id, '{"q": "weather"}', 0, "no_such_tool");
    const timeline = assembleTimeline({
      run,
      calls: [readable, unreadable, unknown],
      results: [],
      events: [],
      truncated: true,
      tools,
      auditUrl: "https://audit.example.test",
      now: new Date(T0 + 100),
    });
    expect(timeline.calls.map((c) => [c.arguments, c.arguments_hidden])).toEqual([
      [{ amount: 5, card: "[REDACTED]", extra: true }, false],
      [undefined, true],
      [{ q: "weather" }, false],
    ]);
    expect(JSON.stringify(timeline)).not.toContain(SECRET);
    expect(timeline).toMatchObject({ truncated: true, audit_url: `https://audit.example.test/v1/runs/${run._id}/events`, started_at: at(0) });
    expect(timeline.calls[0]!.audit_url).toBe(`https://audit.example.test/v1/calls/${readable._id}/events`);
    // Without events the proposal time is the call record's.
    expect(timeline.calls[0]!.proposed_at).toBe(at(10));
  });
});
