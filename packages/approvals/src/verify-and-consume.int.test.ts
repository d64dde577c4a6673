import { canonicalHash, newCallId, newRunId, type Decision, type JsonValue } from "@toolgate/contracts";
import { ContractCompiler } from "@toolgate/registry";
import { testDatabase } from "@toolgate/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { approvalIdFor, MongoApprovalStore, type ApprovalRequestRecord } from "./approval-store.js";
import { planHash } from "./plan-hash.js";
import { verifyAndConsume, type ApprovalPresentation } from "./verify-and-consume.js";

let database: Awaited<ReturnType<typeof testDatabase>>;
let store: MongoApprovalStore;

beforeAll(async () => {
  database = await testDatabase("tg_approvals_");
  store = new MongoApprovalStore(database.db);
  await store.ensureIndexes();
});
afterAll(async () => {
  await database.dispose();
});

const tool = { name: "save_evidence", version: "1.0.0", hash: `sha256:${"a".repeat(64)}` };
const alice = { tenant: "acme", subject: "alice", roles: ["researcher"] };
const carol = { tenant: "acme", subject: "carol", roles: ["approver"] };
/** The contract's own interpreter names the resources, as the executor's compiled tool does. */
const saveEvidence = new ContractCompiler().compile({
  name: "save_evidence",
  version: "1.0.0",
  description: "Appends a claim and its source to a research task's evidence.",
  owner: "research",
  input_schema: { type: "object", properties: { task_id: { type: "string" }, claim: { type: "string" }, source_url: { type: "string" } } },
  output_schema: { type: "object" },
  side_effect: "write",
  risk: "medium",
  approval: "when_tainted",
  timeout_ms: 1_000,
  idempotency: { kind: "keyed" },
  resources: [{ type: "task", pointer: "/task_id" }],
});
const T0 = Date.parse("2026-03-01T10:00:00Z");

/** A call with a stored request for `args`, optionally decided; returns what an executor would be handed. */
async function approvedCall(
  args: Record<string, JsonValue>,
  outcome: "approved" | "denied" | "expired" | "pending" = "approved",
  grantMs = 60_000,
): Promise<{ decision: Decision; request: ApprovalRequestRecord }> {
  const callId = newCallId();
  const runId = newRunId();
  const id = approvalIdFor(callId);
  const plan = planHash({ tool, arguments: args, principal: alice, resources: saveEvidence.resources(args) });
  const request: ApprovalRequestRecord = {
    _id: id,
    call_id: callId,
    run_id: runId,
    tenant: "acme",
    requester: alice,
    tool,
    risk: "medium",
    side_effect: "write",
    arguments_json: JSON.stringify(args),
    args_hash: canonicalHash(args),
    plan_hash: plan,
    context: { task_id: "task_c04" },
    taint: { tainted: true, sources: ["fetch_document"] },
    reasons: ["tool: approval required by rule-of-two"],
    policy_version: "test",
    event_seq: 2,
    requested_at: new Date(T0),
    expires_at: new Date(T0 + 600_000),
    status: "open",
  };
  await store.request(request);
  if (outcome !== "pending") {
    await store.decide({
      _id: id,
      call_id: callId,
      outcome,
      ...(outcome === "expired" ? {} : { approver: carol }),
      decided_at: new Date(T0),
      ...(outcome === "approved" ? { grant_expires_at: new Date(T0 + grantMs) } : {}),
    });
  }
  const decision: Decision = {
    decision_id: `dec_${callId.slice(5)}`,
    call_id: callId,
    run_id: runId,
    tool,
    args_hash: canonicalHash(args),
    principal: alice,
    context: { task_id: "task_c04" },
    policy_version: "test",
    issued_at: new Date(T0).toISOString(),
    expires_at: new Date(T0 + grantMs).toISOString(),
    key_id: "k",
    approval: { approval_id: id, plan_hash: plan },
  };
  return { decision, request };
}

const present = (decision: Decision, args: Record<string, JsonValue>, presentation: string, now = T0 + 1_000): ApprovalPresentation => ({
  decision,
  arguments: args,
  approvalRule: "when_tainted",
  resources: saveEvidence.resources(args),
  presentation,
  consumer: "executor-test",
  now: new Date(now),
});

const args = { task_id: "task_c04", claim: "Sessions persist state.", source_url: "https://example.test/s" };

describe("verifyAndConsume", () => {
  it("lets a decision without an approval through without touching the store, unless the contract always requires one", async () => {
    const { decision } = await approvedCall(args);
    const { approval: _, ...plain } = decision;
    expect(await verifyAndConsume(store, present(plain, args, "stream:1"))).toEqual({ ok: true, approval: "none" });
    const always = await verifyAndConsume(store, { ...present(plain, args, "stream:1"), approvalRule: "always" });
    expect(always).toMatchObject({ ok: false, code: "APPROVAL_REQUIRED", terminal: true });
  });

  it("consumes an approval once: its redelivery passes, any other presentation of it is APPROVAL_CONSUMED", async () => {
    const { decision } = await approvedCall(args);
    expect(await verifyAndConsume(store, present(decision, args, "stream:10"))).toEqual({ ok: true, approval: "consumed" });
    // A redelivery of the same message, even after the grant expired: the answer does not change.
    expect(await verifyAndConsume(store, present(decision, args, "stream:10", T0 + 3_600_000))).toEqual({ ok: true, approval: "consumed" });
    // A copy of the message published again: the same call's first presentation owns its terminal event.
    const replay = await verifyAndConsume(store, present(decision, args, "stream:11"));
    expect(replay).toMatchObject({ ok: false, code: "APPROVAL_CONSUMED", terminal: false });
    expect(replay.ok === false && replay.detail).toMatch(/^APPROVAL_CONSUMED: /);
  });

  it("refuses other arguments with APPROVAL_MISMATCH (a value, an NFD string, a duplicate key's other value), and that burns the approval", async () => {
    const cafe = { ...args, claim: "Caf\u00e9 sessions persist state." };
    for (const [approved, changed] of [
      [args, { ...args, claim: "Sessions delete state." }],
      [cafe, { ...cafe, claim: cafe.claim.normalize("NFD") }],
      [args, { ...args, task_id: "task_other" }],
      [args, { ...args, quote: "" }],
    ] as const) {
      expect(canonicalHash(changed)).not.toBe(canonicalHash(approved));
      const { decision } = await approvedCall(approved);
      const forged = { ...decision, args_hash: canonicalHash(changed) };
      expect(await verifyAndConsume(store, present(forged, changed, "stream:20"))).toMatchObject({ ok: false, code: "APPROVAL_MISMATCH", terminal: true });
      // The genuine presentation that follows finds the approval used: nothing runs for this call any more.
      expect(await verifyAndConsume(store, present(decision, approved, "stream:21"))).toMatchObject({ ok: false, code: "APPROVAL_CONSUMED", terminal: false });
    }
  });

  it("accepts the approved arguments in another key order or number spelling: they are the same plan", async () => {
    const numeric = { ...args, quote: "x" };
    const { decision } = await approvedCall(numeric);
    const respelled = JSON.parse('{"quote":"x","source_url":"https://example.test/s","claim":"Sessions persist state.","task_id":"task_c04"}') as Record<
      string,
      JsonValue
    >;
    expect(await verifyAndConsume(store, present(decision, respelled, "stream:30"))).toEqual({ ok: true, approval: "consumed" });
  });

  it("refuses an approval presented for another call, and the call it belongs to cannot use it afterwards", async () => {
    const a = await approvedCall(args);
    const b = await approvedCall(args, "pending");
    const borrowed = { ...b.decision, approval: a.decision.approval! };
    expect(await verifyAndConsume(store, present(borrowed, args, "stream:40"))).toMatchObject({ ok: false, code: "APPROVAL_MISMATCH", terminal: true });
    // The borrowed approval is burned: its own call ends too (the presentation that burned it was another call's).
    expect(await verifyAndConsume(store, present(a.decision, args, "stream:41"))).toMatchObject({ ok: false, code: "APPROVAL_CONSUMED", terminal: true });
  });

  it("refuses another principal's decision carrying the approval", async () => {
    const { decision } = await approvedCall(args);
    const other = { ...decision, principal: { ...alice, subject: "mallory" } };
    expect(await verifyAndConsume(store, present(other, args, "stream:45"))).toMatchObject({ code: "APPROVAL_MISMATCH" });
  });

  it("has distinct codes for denied, expired (request or grant), missing and unknown approvals", async () => {
    const denied = await approvedCall(args, "denied");
    expect(await verifyAndConsume(store, present(denied.decision, args, "stream:50"))).toMatchObject({ code: "APPROVAL_DENIED" });
    const expired = await approvedCall(args, "expired");
    expect(await verifyAndConsume(store, present(expired.decision, args, "stream:51"))).toMatchObject({ code: "APPROVAL_EXPIRED" });
    const late = await approvedCall(args, "approved", 5_000);
    expect(await verifyAndConsume(store, present(late.decision, args, "stream:52", T0 + 5_000))).toMatchObject({ code: "APPROVAL_EXPIRED" });
    const pending = await approvedCall(args, "pending");
    expect(await verifyAndConsume(store, present(pending.decision, args, "stream:53"))).toMatchObject({ code: "APPROVAL_REQUIRED" });
    const unknown = await approvedCall(args);
    const invented = { ...unknown.decision, approval: { approval_id: "apr_nothing", plan_hash: unknown.decision.approval!.plan_hash } };
    expect(await verifyAndConsume(store, present(invented, args, "stream:54"))).toMatchObject({ code: "APPROVAL_MISMATCH" });
  });

  it("lets exactly one of many concurrent presentations consume an approval", async () => {
    const { decision } = await approvedCall(args);
    const outcomes = await Promise.all(Array.from({ length: 12 }, (_, i) => verifyAndConsume(store, present(decision, args, `stream:${100 + i}`))));
    expect(outcomes.filter((o) => o.ok)).toHaveLength(1);
    expect(outcomes.filter((o) => !o.ok && o.code === "APPROVAL_CONSUMED")).toHaveLength(11);
  });
});
