import { MongoApprovalStore, verifyAndConsume } from "@toolgate/approvals";
import type { EventBus } from "@toolgate/bus";
import { canonicalHash, decisionSigner, decisionVerifier, type CallEvent, type CallEventOf, type ToolgateEvent } from "@toolgate/contracts";
import { ToolRegistry, fixedContracts } from "@toolgate/registry";
import { createLogger } from "@toolgate/telemetry";
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { MongoClient, type Db } from "mongodb";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { ApprovalDesk } from "./approval-desk.js";
import type { CedarPolicies } from "./cedar-policies.js";
import { decide } from "./decide.js";
import { MongoQuotaCounter } from "./quota-counter.js";
import { ALICE, BOB, CAROL, compiled, proposal, researchContracts } from "./test-fixtures.js";

// The servers the workspace's global setup resolved (testkit is not a dependency of this service).
const { mongoUrl } = (inject as (key: string) => { mongoUrl: string })("toolgateInfra");
let client: MongoClient;
let db: Db;
let store: MongoApprovalStore;
const published: ToolgateEvent[] = [];
const bus = {
  publish: async (event: ToolgateEvent) => {
    published.push(event);
    return { seq: published.length, duplicate: false };
  },
} as unknown as EventBus;
const keys = generateKeyPairSync("ed25519");
const signer = decisionSigner(keys.privateKey.export({ type: "pkcs8", format: "pem" }).toString());
const verifier = decisionVerifier([keys.publicKey.export({ type: "spki", format: "pem" }).toString()]);
const registry = ToolRegistry.from(researchContracts);
const policies = compiled();
let clock = Date.parse("2026-03-04T10:00:00Z");

function desk(options: { requestTtlMs?: number; grantTtlMs?: number; policies?: () => CedarPolicies } = {}): ApprovalDesk {
  return new ApprovalDesk({
    store,
    bus,
    contracts: fixedContracts(registry),
    policies: options.policies ?? (() => policies),
    signer,
    requestTtlMs: options.requestTtlMs ?? 60_000,
    grantTtlMs: options.grantTtlMs ?? 30_000,
    logger: createLogger({ service: "policy-test", level: "silent", instance: "t" }),
    now: () => new Date(clock),
  });
}

beforeAll(async () => {
  client = await new MongoClient(mongoUrl).connect();
  db = client.db(`tg_policy_${randomBytes(4).toString("hex")}`);
  store = new MongoApprovalStore(db);
  await store.ensureIndexes();
});
afterAll(async () => {
  await db.dropDatabase();
  await client.close();
});

const save = { task_id: "task_c04", claim: "Sessions persist state.", source_url: "https://example.test/s" };

/** Proposes a tainted save_evidence (which needs approval) and opens its request. */
async function pending(d: ApprovalDesk, args: Record<string, unknown> = save) {
  const p = proposal("save_evidence", args, { tainted: true });
  const verdict = decide(p, registry, policies, new Date(clock));
  if (verdict.kind !== "approval_required") throw new Error(`expected approval_required, got ${verdict.kind}`);
  const request = await d.open(p, verdict, policies.version);
  return { proposal: p, request };
}

const eventsOf = (callId: string) => published.filter((e): e is CallEvent => e.kind === "call" && e.call_id === callId);

describe("ApprovalDesk", () => {
  it("opens a request with an expiry, lists it for an approver (not for the requester), and approves it into a signed authorization", async () => {
    const d = desk();
    const { proposal: p, request } = await pending(d);
    expect(eventsOf(p.call_id).map((e) => `${e.type}:${e.seq}`)).toEqual(["approval_requested:2"]);
    const requested = eventsOf(p.call_id)[0] as CallEventOf<"approval_requested">;
    expect(requested.payload).toEqual({ approval_id: request._id, plan_hash: request.plan_hash, expires_at: new Date(clock + 60_000).toISOString() });

    expect((await d.list(CAROL)).map((a) => a.approval_id)).toContain(request._id);
    expect((await d.list(ALICE)).map((a) => a.approval_id)).not.toContain(request._id);
    expect(await d.list(BOB)).toEqual([]);
    const [view] = await d.list(CAROL, { callId: p.call_id });
    expect(view).toMatchObject({ tool: { name: "save_evidence" }, requester: { subject: "alice" }, risk: "medium", arguments: save, state: "pending" });

    const approved = await d.approve(request._id, CAROL, { planHash: request.plan_hash, note: "looks right" });
    expect(approved).toMatchObject({ ok: true, approval: { state: "approved", approver: { subject: "carol" } } });
    const trail = eventsOf(p.call_id);
    expect(trail.map((e) => `${e.type}:${e.seq}`)).toEqual(["approval_requested:2", "approval_granted:3", "authorized:4"]);
    const authorized = trail[2] as CallEventOf<"authorized">;
    expect(authorized.principal).toEqual(ALICE);
    expect(authorized.payload.decision.approval).toEqual({ approval_id: request._id, plan_hash: request.plan_hash });
    expect(authorized.payload.decision.expires_at).toBe(new Date(clock + 30_000).toISOString());
    expect(verifier.check(authorized.payload.decision, authorized.payload.signature)).toBeUndefined();
    expect(canonicalHash(authorized.payload.arguments)).toBe(authorized.payload.decision.args_hash);
    // What the executor would then do with it: consume once.
    const check = await verifyAndConsume(store, {
      decision: authorized.payload.decision,
      arguments: authorized.payload.arguments,
      approvalRule: registry.get("save_evidence")!.contract.approval,
      resources: registry.get("save_evidence")!.resources(authorized.payload.arguments),
      presentation: "stream:1",
      consumer: "e",
      now: new Date(clock + 1_000),
    });
    expect(check).toEqual({ ok: true, approval: "consumed" });
    expect(await d.approve(request._id, CAROL)).toMatchObject({ ok: false, refusal: { status: 409, code: "ALREADY_DECIDED" } });
  });

  it("refuses self-approval, a principal without the right, another tenant (as not found) and a plan hash other than the request's", async () => {
    const d = desk();
    const { request } = await pending(d);
    expect(await d.approve(request._id, { ...ALICE, roles: ["approver"] })).toMatchObject({ ok: false, refusal: { status: 403, code: "SELF_APPROVAL" } });
    expect(await d.approve(request._id, BOB)).toMatchObject({ ok: false, refusal: { status: 403, code: "NOT_AN_APPROVER" } });
    expect(await d.approve(request._id, { ...CAROL, tenant: "globex" })).toMatchObject({ ok: false, refusal: { status: 404 } });
    expect(await d.approve("apr_nothing", CAROL)).toMatchObject({ ok: false, refusal: { status: 404 } });
    expect(await d.approve(request._id, CAROL, { planHash: `sha256:${"0".repeat(64)}` })).toMatchObject({
      ok: false,
      refusal: { status: 409, code: "APPROVAL_MISMATCH" },
    });
    expect((await d.get(request._id, CAROL)).ok).toBe(true);
    expect((await d.get(request._id, ALICE)).ok).toBe(true);
    expect((await d.get(request._id, BOB)).ok).toBe(false);
  });

  it("denies into a terminal APPROVAL_DENIED with the approver in the reasons", async () => {
    const d = desk();
    const { proposal: p, request } = await pending(d);
    expect(await d.deny(request._id, CAROL, { note: "wrong source" })).toMatchObject({ ok: true, approval: { state: "denied" } });
    const denied = eventsOf(p.call_id).at(-1) as CallEventOf<"denied">;
    expect(denied).toMatchObject({ type: "denied", seq: 3, payload: { result: { error: { code: "APPROVAL_DENIED" } }, policy_version: policies.version } });
    expect(denied.payload.reasons).toEqual([`approval ${request._id} denied by acme/carol: wrong source`]);
  });

  it("expires a request nobody decided (one replica publishes), and refuses a late approval with APPROVAL_EXPIRED", async () => {
    const [a, b] = [desk({ requestTtlMs: 5_000 }), desk({ requestTtlMs: 5_000 })];
    const { proposal: p, request } = await pending(a);
    clock += 5_000;
    const swept = await Promise.all([a.sweep(), b.sweep()]);
    expect(swept.reduce((n, s) => n + s.expired, 0)).toBeGreaterThanOrEqual(1);
    const terminals = eventsOf(p.call_id).filter((e) => e.type === "denied");
    expect(terminals).toHaveLength(1);
    expect(terminals[0]).toMatchObject({ payload: { result: { error: { code: "APPROVAL_EXPIRED" } } } });
    expect(await a.approve(request._id, CAROL)).toMatchObject({ ok: false, refusal: { status: 410, code: "APPROVAL_EXPIRED" } });
  });

  it("withdraws the open request of a stopped run: the call ends with BUDGET_EXCEEDED and can no longer be approved", async () => {
    const [a, b] = [desk(), desk()];
    const { proposal: p, request } = await pending(a);
    const other = await pending(a);
    // Both replicas see the stop (a redelivery looks the same): one decision, one terminal event.
    const withdrawn = await Promise.all([a.withdrawRun(p.run_id, "approval_timeout"), b.withdrawRun(p.run_id, "approval_timeout")]);
    expect(withdrawn[0] + withdrawn[1]).toBe(1);
    const terminals = eventsOf(p.call_id).filter((e): e is CallEventOf<"denied"> => e.type === "denied");
    expect(terminals).toHaveLength(1);
    expect(terminals[0]!.payload).toMatchObject({ result: { ok: false, error: { code: "BUDGET_EXCEEDED" } } });
    expect(terminals[0]!.payload.reasons).toEqual([`approval ${request._id} withdrawn: the run stopped (approval_timeout) before anyone decided`]);
    expect(await a.approve(request._id, CAROL)).toMatchObject({ ok: false, refusal: { status: 409, code: "ALREADY_DECIDED" } });
    expect(await a.list(CAROL, { callId: p.call_id })).toEqual([]);
    // Another run's request is untouched; a stop that is not a budget ends its calls with APPROVAL_DENIED.
    expect(eventsOf(other.proposal.call_id).map((e) => e.type)).toEqual(["approval_requested"]);
    expect(await a.withdrawRun(other.proposal.run_id, "model_error")).toBe(1);
    expect(eventsOf(other.proposal.call_id).at(-1)).toMatchObject({ type: "denied", payload: { result: { error: { code: "APPROVAL_DENIED" } } } });
  });

  it("withdraws the request of a cancelled call: it ends APPROVAL_DENIED once, and approving it afterwards is refused", async () => {
    const [a, b] = [desk(), desk()];
    const { proposal: p, request } = await pending(a);
    const other = await pending(a);
    const withdrawn = await Promise.all([a.withdrawCall(p.call_id, ALICE, "the caller cancelled it"), b.withdrawCall(p.call_id, ALICE, "again")]);
    expect(withdrawn.filter(Boolean)).toHaveLength(1);
    const terminals = eventsOf(p.call_id).filter((e): e is CallEventOf<"denied"> => e.type === "denied");
    expect(terminals).toHaveLength(1);
    expect(terminals[0]).toMatchObject({
      seq: 3,
      payload: { result: { ok: false, error: { code: "APPROVAL_DENIED", message: expect.stringContaining("cancelled") } } },
    });
    const approved = await a.approve(request._id, CAROL, { planHash: request.plan_hash });
    expect(approved).toMatchObject({ ok: false, refusal: { status: 409, code: "ALREADY_DECIDED", details: { outcome: "withdrawn" } } });
    expect(!approved.ok && approved.refusal.message).toContain("cancelled");
    expect(eventsOf(p.call_id).map((e) => e.type)).toEqual(["approval_requested", "denied"]);
    expect(await a.get(request._id, CAROL)).toMatchObject({ ok: true, approval: { state: "withdrawn" } });
    expect(await a.list(CAROL, { callId: p.call_id })).toEqual([]);
    // The run's other call still waits; another principal cannot withdraw it.
    expect(await a.withdrawCall(other.proposal.call_id, BOB, "not bob's")).toBe(false);
    expect(eventsOf(other.proposal.call_id).map((e) => e.type)).toEqual(["approval_requested"]);
    expect((await a.list(CAROL, { callId: other.proposal.call_id })).map((v) => v.approval_id)).toEqual([other.request._id]);
  });

  it("withdraws a request stored after its call's cancel arrived (the cancel raced the proposal's decision)", async () => {
    const d = desk();
    const p = proposal("save_evidence", save, { tainted: true });
    expect(await d.withdrawCall(p.call_id, ALICE, "cancelled early")).toBe(false);
    expect(eventsOf(p.call_id)).toEqual([]);
    // Nothing waits for the sweep: the withdrawal of a call that never asked is marked published.
    expect((await d.sweep()).republished).toBe(0);
    const verdict = decide(p, registry, policies, new Date(clock));
    if (verdict.kind !== "approval_required") throw new Error(`expected approval_required, got ${verdict.kind}`);
    const request = await d.open(p, verdict, policies.version);
    expect(eventsOf(p.call_id).map((e) => `${e.type}:${e.seq}`)).toEqual(["approval_requested:2", "denied:3"]);
    expect(await d.approve(request._id, CAROL)).toMatchObject({ ok: false, refusal: { code: "ALREADY_DECIDED" } });
  });

  it("lets exactly one of a concurrent approve and deny win, and publishes only its outcome", async () => {
    const d = desk();
    const { proposal: p, request } = await pending(d);
    const dave = { tenant: "acme", subject: "dave", roles: ["approver"] };
    const [x, y] = await Promise.all([d.approve(request._id, CAROL), d.deny(request._id, dave)]);
    expect([x.ok, y.ok].filter(Boolean)).toHaveLength(1);
    const types = eventsOf(p.call_id).map((e) => e.type);
    expect(types.filter((t) => t === "authorized" || t === "denied")).toHaveLength(1);
  });

  it("publishes a decision that a stopped replica recorded but never published", async () => {
    const d = desk();
    const { proposal: p, request } = await pending(d);
    await store.decide({
      _id: request._id,
      call_id: p.call_id,
      outcome: "approved",
      approver: CAROL,
      decided_at: new Date(clock),
      grant_expires_at: new Date(clock + 30_000),
    });
    clock += 3_000;
    expect((await d.sweep()).republished).toBeGreaterThanOrEqual(1);
    expect(eventsOf(p.call_id).map((e) => e.type)).toEqual(["approval_requested", "approval_granted", "authorized"]);
    expect((await store.getDecision(request._id))?.published_at).toBeInstanceOf(Date);
  });

  it("authorizes the call again when it is approved: a policy that stopped allowing it ends it with PERMISSION_DENIED", async () => {
    let current = policies;
    const d = desk({ policies: () => current });
    const { proposal: p, request } = await pending(d);
    // While the call waited, the researchers' tool permission went away.
    current = compiled({ "tools.cedar": null });
    expect(await d.approve(request._id, CAROL)).toMatchObject({ ok: false, refusal: { status: 409, code: "POLICY_DENIES" } });
    const denied = eventsOf(p.call_id).at(-1) as CallEventOf<"denied">;
    expect(denied).toMatchObject({ type: "denied", payload: { result: { error: { code: "PERMISSION_DENIED" } }, policy_version: current.version } });
    expect(denied.payload.reasons).toEqual(["at approval: call save_evidence: no policy permits it (deny by default)"]);
    expect(eventsOf(p.call_id).some((e) => e.type === "authorized")).toBe(false);
    expect(await d.approve(request._id, CAROL)).toMatchObject({ ok: false, refusal: { code: "ALREADY_DECIDED" } });
  });

  it("keeps a redelivered proposal's request (same id, same plan, same expiry)", async () => {
    const d = desk();
    const { proposal: p, request } = await pending(d);
    clock += 1_000;
    const verdict = decide(p, registry, policies, new Date(clock));
    const again = await d.open(p, verdict as Extract<typeof verdict, { kind: "approval_required" }>, policies.version);
    expect(again).toEqual(request);
  });
});

describe("MongoQuotaCounter", () => {
  it("shares one window's limit among replicas and says when to retry", async () => {
    const replicas = [new MongoQuotaCounter(db), new MongoQuotaCounter(db), new MongoQuotaCounter(db)];
    await replicas[0]!.ensureIndexes();
    const t = Date.parse("2026-03-04T10:00:10Z");
    const outcomes = await Promise.all(Array.from({ length: 15 }, (_, i) => replicas[i % 3]!.take("q:acme/alice:search", 10, 60_000, t)));
    expect(outcomes.filter((o) => o.ok)).toHaveLength(10);
    expect(outcomes.find((o) => !o.ok)).toEqual({ ok: false, retryAfterMs: 50_000 });
    // The next window starts afresh; another key is counted apart.
    expect(await replicas[1]!.take("q:acme/alice:search", 10, 60_000, t + 60_000)).toEqual({ ok: true });
    expect(await replicas[2]!.take("q:acme/bob:search", 10, 60_000, t)).toEqual({ ok: true });
    expect(await replicas[0]!.purge(new Date(t + 60_000))).toBe(11);
  });
});
