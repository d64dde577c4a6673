import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { eventId, type Decision } from "@toolgate/contracts";
import { REPO_ROOT, Stack, callEvents, resultOf, testInfra, waitForCallEvents, type AuditedEvent, type CallResult, settledCallEvents } from "@toolgate/testkit";
import { MongoClient } from "mongodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// Rule of Two and approvals through the real services: a tainted run's write waits for a human, who approves or
// denies it over HTTP or the CLI; the approval is bound to the exact plan and call, and used once.
const CLI = `${REPO_ROOT}packages/cli/dist/cli.js`;
const DOC = "https://example.test/docs/openai-agents-sdk/sessions";

let stack: Stack;
let nc: NatsConnection;
let mongo: MongoClient;

beforeAll(async () => {
  const infra = testInfra();
  stack = await Stack.start({ natsUrl: infra.natsUrl, mongoUrl: infra.mongoUrl, ruleOfTwo: true });
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

type Event = AuditedEvent["event"] & { principal?: unknown };
interface Approval {
  approval_id: string;
  call_id: string;
  state: string;
  tool: { name: string; version: string };
  risk: string;
  requester: { tenant: string; subject: string };
  arguments: Record<string, unknown>;
  plan_hash: string;
  reasons: string[];
  taint: { tainted: boolean; sources: string[] };
  expires_at: string;
}

const save = (taskId: string, claim: string) => ({ task_id: taskId, claim, source_url: DOC });
const evidence = (filter: Record<string, unknown>) => mongo.db(`${stack.name}_tools`).collection("evidence").countDocuments(filter);

/** A run on `taskId` that has read a document (untrusted content): the run is tainted. */
async function taintedRun(taskId: string): Promise<string> {
  const body = { context: { task_id: taskId }, calls: [{ id: "h1", name: "fetch_document", arguments: { url: DOC } }], wait_ms: 30_000 };
  const read = await stack.api<{ run_id: string; results: { result?: CallResult }[] }>("POST", "/v1/tool-calls", body);
  expect(read.body.results[0]!.result?.ok).toBe(true);
  return read.body.run_id;
}

/** Proposes `save_evidence` in `runId` and waits for policy to ask for approval; returns the call id and the request. */
let saves = 0;
async function pendingSave(runId: string, args: Record<string, unknown>, extra: Record<string, unknown> = {}): Promise<{ callId: string; requested: Event }> {
  // A host's call id names one call in its run: each new call gets its own.
  const body = { run_id: runId, calls: [{ id: `h2_${++saves}`, name: "save_evidence", arguments: args }], wait_ms: 0, ...extra };
  const submitted = await stack.api<{ results: { call_id: string }[] }>("POST", "/v1/tool-calls", body);
  expect(submitted.status).toBe(202);
  const callId = submitted.body.results[0]!.call_id;
  const events = (await waitForCallEvents(stack, callId, (es) => es.some((e) => e.type === "approval_requested"))) as Event[];
  return { callId, requested: events.find((e) => e.type === "approval_requested")! };
}

async function approvalOf(callId: string, credential?: string): Promise<Approval | undefined> {
  const listed = await stack.policyApi<{ approvals: Approval[] }>("GET", `/v1/approvals?call_id=${callId}`, undefined, credential);
  expect(listed.status).toBe(200);
  return listed.body.approvals[0];
}

const cli = async (...args: string[]) =>
  (
    await promisify(execFile)(process.execPath, [CLI, ...args], {
      env: { PATH: process.env.PATH ?? "", TOOLGATE_POLICY_URL: stack.policyUrl, TOOLGATE_APPROVER_TOKEN: stack.apiKeys.carol },
    })
  ).stdout;

describe("approvals", () => {
  let approvedCall: string;
  let firstApproval: { approval_id: string; plan_hash: string };

  it("holds a tainted run's save_evidence for a human, whatever the host claims about taint", async () => {
    const runId = await taintedRun("task_flow");
    // The host tries to declare the run clean: taint is computed by the orchestrator, not taken from the request.
    const { callId, requested } = await pendingSave(runId, save("task_flow", "Sessions keep conversation state."), {
      taint: { tainted: false, sources: [] },
      context: { task_id: "task_flow" },
    });
    const proposed = (await callEvents(stack, callId)).find((e) => e.type === "proposed")!;
    expect(proposed.payload.taint).toEqual({ tainted: true, sources: ["fetch_document"] });
    expect(requested.payload).toMatchObject({ approval_id: expect.stringMatching(/^apr_/), plan_hash: expect.stringMatching(/^sha256:/) });

    // What the approver sees: tool, arguments, plan hash, requester, risk, expiry, and why a human is needed.
    const approval = (await approvalOf(callId))!;
    expect(approval).toMatchObject({
      approval_id: requested.payload.approval_id,
      state: "pending",
      tool: { name: "save_evidence", version: "1.1.0" },
      risk: "medium",
      requester: { tenant: "acme", subject: "alice" },
      arguments: save("task_flow", "Sessions keep conversation state."),
      plan_hash: requested.payload.plan_hash,
      expires_at: requested.payload.expires_at,
      taint: { tainted: true, sources: ["fetch_document"] },
    });
    expect(approval.reasons).toContain("call save_evidence: approval required by rule-of-two");
    // The requester is never offered its own call, and nobody outside the tenant sees it.
    expect(await approvalOf(callId, stack.apiKeys.alice)).toBeUndefined();
    expect((await stack.api<{ status: string }>("GET", `/v1/tool-calls/${callId}`)).body.status).toBe("pending");

    approvedCall = callId;
    firstApproval = { approval_id: approval.approval_id, plan_hash: approval.plan_hash };
  });

  it("refuses an unauthenticated caller, a principal without the right, and the requester approving itself", async () => {
    const path = `/v1/approvals/${firstApproval.approval_id}/approve`;
    expect((await stack.policyApi("POST", path, {}, "tgk_nobody_000000000000")).status).toBe(401);
    const bob = await stack.policyApi<{ error: { code: string } }>("POST", path, {}, stack.apiKeys.bob);
    expect([bob.status, bob.body.error.code]).toEqual([403, "NOT_AN_APPROVER"]);
    const aliceApprover = await stack.jwt({ sub: "alice", roles: ["researcher", "approver"] });
    const self = await stack.policyApi<{ error: { code: string } }>("POST", path, {}, aliceApprover);
    expect([self.status, self.body.error.code]).toEqual([403, "SELF_APPROVAL"]);
    const wrongPlan = await stack.policyApi<{ error: { code: string } }>("POST", path, { plan_hash: `sha256:${"0".repeat(64)}` });
    expect([wrongPlan.status, wrongPlan.body.error.code]).toEqual([409, "APPROVAL_MISMATCH"]);
    expect((await stack.api<{ status: string }>("GET", `/v1/tool-calls/${approvedCall}`)).body.status).toBe("pending");
  });

  it("approve (an approver's JWT) → the call runs once, bound to the approved plan", async () => {
    const dana = await stack.jwt({ sub: "dana", roles: ["approver"] });
    const approved = await stack.policyApi<{ approval: { state: string } }>(
      "POST",
      `/v1/approvals/${firstApproval.approval_id}/approve`,
      { plan_hash: firstApproval.plan_hash, reason: "source checked" },
      dana,
    );
    expect([approved.status, approved.body.approval.state]).toEqual([200, "approved"]);
    const result = await resultOf(stack, approvedCall);
    expect(result).toMatchObject({ ok: true, data: { stored: true } });
    const events = (await waitForCallEvents(stack, approvedCall, (es) => es.some((e) => e.type === "result_attached"))) as Event[];
    expect(events.map((e) => e.type)).toEqual(["proposed", "approval_requested", "approval_granted", "authorized", "started", "completed", "result_attached"]);
    expect(events.find((e) => e.type === "approval_granted")!.payload.approver).toMatchObject({ tenant: "acme", subject: "dana" });
    const decision = events.find((e) => e.type === "authorized")!.payload.decision as Decision;
    expect(decision.approval).toEqual(firstApproval);
    expect(decision.principal).toMatchObject({ tenant: "acme", subject: "alice" });
    expect(Date.parse(decision.expires_at) - Date.parse(decision.issued_at)).toBeLessThanOrEqual(5 * 60_000);
    expect(await evidence({ task_id: "task_flow" })).toBe(1);
    const again = await stack.policyApi<{ error: { code: string } }>("POST", `/v1/approvals/${firstApproval.approval_id}/approve`, {});
    expect([again.status, again.body.error.code]).toEqual([409, "ALREADY_DECIDED"]);
  });

  it("the same approval replayed onto NATS is refused (APPROVAL_CONSUMED, audited) and nothing runs again", async () => {
    // A byte-for-byte copy of the stored message, its signature included, published again past the stream's
    // duplicate detection: the signature holds, the approval does not.
    const subject = `${stack.name}.call.${approvedCall}.authorized`;
    const original = await (await jetstreamManager(nc)).streams.getMessage(stack.eventStream, { last_by_subj: subject });
    await jetstream(nc).publish(subject, original!.data, { msgID: `replay-${approvedCall}`, headers: original!.header });
    const events = await waitForCallEvents(stack, approvedCall, (es) => es.some((e) => e.type === "refused"), { description: "the replay's refusal" });
    const refused = events.find((e) => e.type === "refused")!;
    expect(refused.payload.reason).toBe("approval_invalid");
    expect(refused.payload.detail).toMatch(/^APPROVAL_CONSUMED: /);
    expect(events.filter((e) => e.type === "started")).toHaveLength(1);
    expect(await evidence({ task_id: "task_flow" })).toBe(1);
  });

  it("an approval used for another call fails with APPROVAL_MISMATCH and that call runs nothing", async () => {
    const runId = await taintedRun("task_flow_other");
    const args = save("task_flow_other", "Sessions keep conversation state.");
    const { callId } = await pendingSave(runId, args);
    const authorized = (await callEvents(stack, approvedCall)).find((e) => e.type === "authorized")!;
    const original = authorized.payload.decision as Decision;
    // Correctly signed, for this call and its arguments — but carrying the first call's approval.
    const decision: Decision = {
      ...original,
      decision_id: `dec_${callId.slice(5)}`,
      call_id: callId,
      run_id: runId,
      args_hash: ((await callEvents(stack, callId)).find((e) => e.type === "approval_requested") as Event & { args_hash: string }).args_hash,
      context: { task_id: "task_flow_other" },
    };
    const forged = {
      ...authorized,
      id: eventId(callId, "authorized", 1),
      call_id: callId,
      run_id: runId,
      args_hash: decision.args_hash,
      payload: { decision, signature: stack.policySigner.sign(decision), arguments: args },
    };
    await stack.publishEvent(nc, `${stack.name}.call.${callId}.authorized`, JSON.stringify(forged), { as: "policy" });
    const result = await resultOf(stack, callId);
    expect(result).toMatchObject({ ok: false, error: { code: "APPROVAL_MISMATCH" } });
    const events = await settledCallEvents(stack, callId);
    expect(events.find((e) => e.type === "refused")!.payload.detail).toMatch(
      /^APPROVAL_MISMATCH: .*another call|^APPROVAL_MISMATCH: the approval was given for call/,
    );
    expect(events.some((e) => e.type === "started")).toBe(false);
    expect(await evidence({ task_id: "task_flow_other" })).toBe(0);
  });

  it("deny through the CLI → APPROVAL_DENIED, with the approver and the note in the audited reasons; approve through the CLI → it runs", async () => {
    const runId = await taintedRun("task_flow_cli");
    const denied = await pendingSave(runId, save("task_flow_cli", "A claim the approver rejects."));
    const deniedId = denied.requested.payload.approval_id as string;
    const listed = await cli("approvals", "list");
    expect(listed).toMatch(new RegExp(`^${deniedId}\\s+save_evidence@1\\.1\\.0\\s+medium risk\\s+call ${denied.callId}\\s+requested by alice`, "m"));
    expect(await cli("approvals", "deny", deniedId, "--reason", "not what the source says")).toContain(`denied ${deniedId}`);
    expect(await resultOf(stack, denied.callId)).toMatchObject({ ok: false, error: { code: "APPROVAL_DENIED" }, retryable: false });
    const deniedEvent = (await settledCallEvents(stack, denied.callId)).find((e) => e.type === "denied")!;
    expect(deniedEvent.payload.reasons).toEqual([`approval ${deniedId} denied by acme/carol: not what the source says`]);
    expect(await evidence({ task_id: "task_flow_cli", claim: "A claim the approver rejects." })).toBe(0);

    const approved = await pendingSave(runId, save("task_flow_cli", "A claim the approver accepts."));
    expect(await cli("approvals", "approve", approved.requested.payload.approval_id as string)).toContain("approved");
    expect(await resultOf(stack, approved.callId)).toMatchObject({ ok: true });
    expect(await evidence({ task_id: "task_flow_cli" })).toBe(1);
  });
});
