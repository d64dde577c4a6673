import { connect, type NatsConnection } from "@nats-io/transport-node";
import { canonicalHash, eventId, type Decision } from "@toolgate/contracts";
import { Stack, resultOf, testInfra, waitFor, waitForCallEvents, type AuditedEvent, type CallResult, settledCallEvents } from "@toolgate/testkit";
import { MongoClient } from "mongodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// An approval is bound to the exact plan: the executor re-computes the plan hash over what it is about to run.
// Every authorization below is signed with the policy's own key (as a compromised or buggy publisher could),
// so only the approval binding stands between it and an execution. The executor starts only once all of them are
// on the stream, each ahead of its call's genuine authorization, and takes one message at a time.
const DOC = "https://example.test/docs/openai-agents-sdk/sessions";
const APPROVE_ALL = `@id("test-approve-saves-and-searches")
forbid (principal, action == Action::"call", resource)
when { [Tool::"save_evidence", Tool::"search_sources"].contains(resource) && !context.approved };
`;

let stack: Stack;
let nc: NatsConnection;
let mongo: MongoClient;

beforeAll(async () => {
  const infra = testInfra();
  stack = await Stack.start({ natsUrl: infra.natsUrl, mongoUrl: infra.mongoUrl, executors: 0, policyFiles: { "approve-test.cedar": APPROVE_ALL } });
  nc = await connect({ servers: infra.natsUrl });
  mongo = await new MongoClient(infra.mongoUrl).connect();
});

afterAll(async () => {
  await nc?.close();
  await stack?.stop();
  await mongo?.db(`${stack.name}_runtime`).dropDatabase();
  await mongo?.db(`${stack.name}_tools`).dropDatabase();
  await mongo?.close();
});

type Event = AuditedEvent["event"] & { principal?: Decision["principal"]; args_hash?: string; tool?: Decision["tool"] };

/** Proposes one call in a new run on `taskId`; returns its ids and its `approval_requested` event. */
async function propose(taskId: string, name: string, args: Record<string, unknown>): Promise<{ callId: string; runId: string; requested: Event }> {
  const body = { context: { task_id: taskId }, calls: [{ id: "h1", name, arguments: args }], wait_ms: 0 };
  const submitted = await stack.api<{ run_id: string; results: { call_id: string }[] }>("POST", "/v1/tool-calls", body);
  const callId = submitted.body.results[0]!.call_id;
  const events = (await waitForCallEvents(stack, callId, (es) => es.some((e) => e.type === "approval_requested"))) as Event[];
  return { callId, runId: submitted.body.run_id, requested: events.find((e) => e.type === "approval_requested")! };
}

/**
 * Publishes, straight onto NATS, an authorization for the call carrying its approval but with other arguments:
 * a decision signed by the policy key over exactly those arguments (so the signature layer lets it through).
 * `raw` replaces the arguments' JSON text in the message (to send duplicate keys or another spelling).
 */
async function presentTampered(
  call: { callId: string; runId: string; requested: Event },
  taskId: string,
  args: Record<string, unknown>,
  raw?: string,
): Promise<void> {
  const decision: Decision = {
    decision_id: `dec_${call.callId.slice(5)}`,
    call_id: call.callId,
    run_id: call.runId,
    tool: call.requested.tool!,
    args_hash: canonicalHash(args),
    principal: call.requested.principal!,
    context: { task_id: taskId },
    policy_version: "tampered",
    issued_at: new Date().toISOString(),
    expires_at: new Date(Date.now() + 5 * 60_000).toISOString(),
    key_id: stack.policySigner.keyId,
    approval: { approval_id: call.requested.payload.approval_id as string, plan_hash: call.requested.payload.plan_hash as string },
  };
  const event = {
    v: 1,
    kind: "call",
    id: eventId(call.callId, "authorized", 1),
    type: "authorized",
    call_id: call.callId,
    run_id: call.runId,
    seq: 4,
    attempt: 1,
    time: new Date().toISOString(),
    source: "policy",
    principal: call.requested.principal,
    tool: call.requested.tool,
    args_hash: decision.args_hash,
    payload: { decision, signature: stack.policySigner.sign(decision), arguments: "__ARGS__" },
  };
  const text = JSON.stringify(event).replace('"__ARGS__"', raw ?? JSON.stringify(args));
  // Signed as policy, as a compromised policy event key would: the plan hash is what stands in the way.
  await stack.publishEvent(nc, `${stack.name}.call.${call.callId}.authorized`, text, { as: "policy" });
}

async function approve(call: { requested: Event }): Promise<void> {
  const answer = await stack.policyApi("POST", `/v1/approvals/${call.requested.payload.approval_id as string}/approve`, {
    plan_hash: call.requested.payload.plan_hash,
  });
  expect(answer.status).toBe(200);
}

const save = (taskId: string, claim: string) => ({ task_id: taskId, claim, source_url: DOC });
const evidence = (filter: Record<string, unknown>) => mongo.db(`${stack.name}_tools`).collection("evidence").countDocuments(filter);
const approvalRefusals = (callId: string) =>
  stack
    .process("executor-1")
    .logs()
    .filter((l) => l.msg === "approval refused" && l.call_id === callId)
    .map((l) => l.code);

describe("an approval bound to the plan hash", () => {
  const cases: Record<string, { callId: string; runId: string; requested: Event }> = {};

  it("is asked for on proposal; a proposal with duplicate keys never gets that far (INVALID_JSON)", async () => {
    const body = {
      context: { task_id: "task_dup" },
      calls: [{ id: "h1", name: "save_evidence", arguments: `{"task_id":"task_dup","claim":"approved text","claim":"other text","source_url":"${DOC}"}` }],
      wait_ms: 30_000,
    };
    const dup = await stack.api<{ results: { call_id: string; result?: CallResult }[] }>("POST", "/v1/tool-calls", body);
    expect(dup.body.results[0]!.result).toMatchObject({ ok: false, error: { code: "INVALID_JSON" } });
    expect((await settledCallEvents(stack, dup.body.results[0]!.call_id)).map((e) => e.type)).toEqual(["proposed", "rejected", "result_attached"]);

    const cafe = "Caf\u00e9 sessions persist state.";
    cases.changed = await propose("task_b_changed", "save_evidence", save("task_b_changed", "Sessions persist state."));
    cases.nfd = await propose("task_b_nfd", "save_evidence", save("task_b_nfd", cafe));
    cases.duplicate = await propose("task_b_dup", "save_evidence", save("task_b_dup", "approved text"));
    cases.respelled = await propose("task_b_same", "search_sources", { query: "agent sessions state", source_type: "official", limit: 3 });

    // Tampered presentations first, then the approvals (each publishes the genuine authorization behind it).
    await presentTampered(cases.changed, "task_b_changed", save("task_b_changed", "Sessions delete state."));
    await presentTampered(cases.nfd, "task_b_nfd", save("task_b_nfd", cafe.normalize("NFD")));
    // Duplicate keys: JSON.parse keeps the last one, so the executor would run "other text".
    const dupArgs = save("task_b_dup", "other text");
    await presentTampered(
      cases.duplicate,
      "task_b_dup",
      dupArgs,
      `{"task_id":"task_b_dup","claim":"approved text","claim":"other text","source_url":"${DOC}"}`,
    );
    // Other key order and 3.0 for 3: the same JSON value, hence the same plan.
    const respelled = { query: "agent sessions state", source_type: "official", limit: 3 };
    await presentTampered(cases.respelled, "task_b_same", respelled, '{"limit":3.0,"source_type":"official","query":"agent sessions state"}');
    for (const c of Object.values(cases)) await approve(c);
    // One call at a time, in stream order: each tampered presentation is checked before the genuine one.
    await stack.startService("executor", "executor-1", { EXECUTOR_SLOTS: "1" });
  });

  it("refuses other arguments with APPROVAL_MISMATCH — a changed value, an NFD string, a duplicate key — and runs nothing, not even the genuine call after it", async () => {
    for (const [name, taskId] of [
      ["changed", "task_b_changed"],
      ["nfd", "task_b_nfd"],
      ["duplicate", "task_b_dup"],
    ] as const) {
      const { callId } = cases[name]!;
      expect(await resultOf(stack, callId), name).toMatchObject({ ok: false, error: { code: "APPROVAL_MISMATCH" }, retryable: false });
      // The genuine authorization that followed found the approval already used by the tampered one.
      await waitFor(() => approvalRefusals(callId).length === 2, { description: `both presentations of ${name} refused` });
      expect(approvalRefusals(callId)).toEqual(["APPROVAL_MISMATCH", "APPROVAL_CONSUMED"]);
      const events = await settledCallEvents(stack, callId);
      expect(
        events.some((e) => e.type === "started"),
        name,
      ).toBe(false);
      expect(events.find((e) => e.type === "refused")!.payload.detail).toMatch(/^APPROVAL_MISMATCH: the plan about to run/);
      expect(await evidence({ task_id: taskId })).toBe(0);
    }
  });

  it("accepts the approved arguments in another key order and number spelling (same plan), runs them once, and refuses the second presentation", async () => {
    const { callId } = cases.respelled!;
    expect(await resultOf(stack, callId)).toMatchObject({ ok: true });
    await waitFor(() => approvalRefusals(callId).length === 1, { description: "the genuine presentation refused as a replay" });
    expect(approvalRefusals(callId)).toEqual(["APPROVAL_CONSUMED"]);
    const events = await waitForCallEvents(stack, callId, (es) => es.some((e) => e.type === "refused"));
    expect(events.filter((e) => e.type === "started")).toHaveLength(1);
    expect(events.filter((e) => e.type === "completed")).toHaveLength(1);
  });
});
