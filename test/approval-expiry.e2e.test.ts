import type { Decision } from "@toolgate/contracts";
import { Stack, resultOf, testInfra, waitFor, waitForCallEvents, type AuditedEvent, settledCallEvents } from "@toolgate/testkit";
import { MongoClient } from "mongodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// Approvals expire: a request nobody decides ends its call with APPROVAL_EXPIRED (policy's sweeper publishes it,
// with no one acting), and an approval's authorization used after its short life is refused by the executor.
const DOC = "https://example.test/docs/openai-agents-sdk/sessions";
const APPROVE_SAVES = `@id("test-approve-saves")
forbid (principal, action == Action::"call", resource == Tool::"save_evidence") when { !context.approved };
`;

let stack: Stack;
let mongo: MongoClient;

beforeAll(async () => {
  const infra = testInfra();
  stack = await Stack.start({
    natsUrl: infra.natsUrl,
    mongoUrl: infra.mongoUrl,
    executors: 0,
    policyFiles: { "approve-test.cedar": APPROVE_SAVES },
    env: { policy: { POLICY_APPROVAL_TTL_MS: "3000", POLICY_APPROVAL_GRANT_TTL_MS: "2000", POLICY_SWEEP_MS: "200" } },
  });
  mongo = await new MongoClient(infra.mongoUrl).connect();
});

afterAll(async () => {
  await stack?.stop();
  await mongo?.db(`${stack.name}_runtime`).dropDatabase();
  await mongo?.db(`${stack.name}_tools`).dropDatabase();
  await mongo?.close();
});

type Event = AuditedEvent["event"];

async function propose(taskId: string): Promise<{ callId: string; requested: Event }> {
  const body = {
    context: { task_id: taskId },
    calls: [{ id: "h1", name: "save_evidence", arguments: { task_id: taskId, claim: "c", source_url: DOC } }],
    wait_ms: 0,
  };
  const submitted = await stack.api<{ results: { call_id: string }[] }>("POST", "/v1/tool-calls", body);
  const callId = submitted.body.results[0]!.call_id;
  const events = await waitForCallEvents(stack, callId, (es) => es.some((e) => e.type === "approval_requested"));
  return { callId, requested: events.find((e) => e.type === "approval_requested")! };
}

const evidence = (taskId: string) => mongo.db(`${stack.name}_tools`).collection("evidence").countDocuments({ task_id: taskId });

describe("approval expiry", () => {
  it("ends a call nobody approved with APPROVAL_EXPIRED, and refuses a late approval; an expired grant does not run", async () => {
    const [unattended, late] = await Promise.all([propose("task_exp_request"), propose("task_exp_grant")]);
    expect(Date.parse(unattended.requested.payload.expires_at as string) - Date.parse(unattended.requested.time)).toBe(3_000);

    // Approved at once; its authorization waits on the stream (no executor yet) past its two-second life.
    const approved = await stack.policyApi("POST", `/v1/approvals/${late.requested.payload.approval_id as string}/approve`, {});
    expect(approved.status).toBe(200);
    const authorized = (await waitForCallEvents(stack, late.callId, (es) => es.some((e) => e.type === "authorized"))).find((e) => e.type === "authorized")!;
    const decision = authorized.payload.decision as Decision;
    expect(Date.parse(decision.expires_at) - Date.parse(decision.issued_at)).toBe(2_000);

    // Nobody acts on the other request: the sweeper ends it.
    expect(await resultOf(stack, unattended.callId, { timeoutMs: 15_000 })).toMatchObject({ ok: false, error: { code: "APPROVAL_EXPIRED" }, retryable: false });
    const events = await settledCallEvents(stack, unattended.callId);
    expect(events.map((e) => e.type)).toEqual(["proposed", "approval_requested", "denied", "result_attached"]);
    expect((events[2]!.payload.reasons as string[])[0]).toMatch(/^approval apr_\w+ expired at /);
    const tooLate = await stack.policyApi<{ error: { code: string } }>(
      "POST",
      `/v1/approvals/${unattended.requested.payload.approval_id as string}/approve`,
      {},
    );
    expect([tooLate.status, tooLate.body.error.code]).toEqual([410, "APPROVAL_EXPIRED"]);

    await waitFor(() => Date.now() > Date.parse(decision.expires_at), { description: "the grant expiring" });
    await stack.startService("executor", "executor-1");
    expect(await resultOf(stack, late.callId)).toMatchObject({ ok: false, error: { code: "APPROVAL_EXPIRED" } });
    const trail = await settledCallEvents(stack, late.callId);
    expect(trail.find((e) => e.type === "refused")!.payload.detail).toMatch(/^APPROVAL_EXPIRED: /);
    expect(trail.some((e) => e.type === "started")).toBe(false);
    expect(await evidence("task_exp_grant")).toBe(0);
    expect(await evidence("task_exp_request")).toBe(0);
  });
});
