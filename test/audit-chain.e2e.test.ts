import { Stack, testInfra, waitFor, type AuditedEvent } from "@toolgate/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";

// Seed 003's chain of evidence, read back through the audit API for one C04 run that needs a human: the user's
// request, the model and the snapshot that answered, the tool definition's version, the proposal, the normalized
// arguments, the policy's decision, the approval, the idempotency key's digest, who answered downstream, the
// result and the final answer — each event signed by the service that owns it.
let stack: Stack;

beforeAll(async () => {
  const infra = testInfra();
  stack = await Stack.start({ natsUrl: infra.natsUrl, mongoUrl: infra.mongoUrl, ruleOfTwo: true });
});

afterAll(async () => {
  await stack?.stop();
});

type Event = AuditedEvent["event"] & { payload: Record<string, unknown>; args_hash?: string };

it("keeps the whole chain of one C04 run, from the user's request to the final answer", async () => {
  const input = "Research task task_id=task_c04: how does the OpenAI Agents SDK manage state? Save one verified claim.";
  const started = await stack.api<{ run_id: string }>("POST", "/v1/runs", { model: "scripted:c04", input, context: { task_id: "task_c04" } });
  expect(started.status).toBe(202);
  const runId = started.body.run_id;
  // The run read untrusted content before it saves: its write waits for a human, who approves it.
  const approval = await waitFor(
    async () => {
      const { body } = await stack.policyApi<{ approvals: { approval_id: string; plan_hash: string; run_id?: string; state: string }[] }>(
        "GET",
        "/v1/approvals?state=pending",
      );
      return body.approvals.find((a) => a.state === "pending");
    },
    { description: "the approval request of save_evidence" },
  );
  expect((await stack.policyApi("POST", `/v1/approvals/${approval.approval_id}/approve`, { plan_hash: approval.plan_hash })).status).toBe(200);
  const trail = (await stack.trace(runId)).map((e) => e.event as Event);
  const of = (kind: string, type: string) => trail.filter((e) => e.kind === kind && e.type === type);

  expect(of("run", "started")[0]!.payload).toMatchObject({ model: "scripted:c04", input, context: { task_id: "task_c04" } });
  for (const turn of of("run", "model_responded")) expect(turn.payload.model_version).toBe("scripted-c04-1");
  expect(of("run", "completed")[0]!.payload.final_text).toEqual(expect.any(String));

  const saveId = of("call", "proposed").find((e) => e.payload.tool_name === "save_evidence")!.call_id!;
  const save = (type: string) => trail.find((e) => e.call_id === saveId && e.type === type)!;
  const proposed = save("proposed");
  expect(JSON.parse(proposed.payload.arguments_json as string)).toMatchObject({ task_id: "task_c04" });
  const authorized = save("authorized");
  // The definition's exact version, and the normalized arguments the decision was signed for.
  expect(authorized.tool).toMatchObject({ name: "save_evidence", version: expect.any(String), hash: expect.stringMatching(/^sha256:/) });
  expect(authorized.payload.arguments).toMatchObject({ task_id: "task_c04" });
  expect(authorized.payload.decision).toMatchObject({ call_id: saveId, args_hash: authorized.args_hash, approval: { approval_id: approval.approval_id } });
  expect(save("approval_requested").payload).toMatchObject({ approval_id: approval.approval_id, plan_hash: approval.plan_hash });
  expect(save("approval_granted").payload).toMatchObject({ approval_id: approval.approval_id, approver: { subject: "carol" } });
  expect(save("started").payload.idempotency_key_hash).toMatch(/^sha256:[0-9a-f]{64}$/);
  const completed = save("completed");
  expect(completed.payload.result).toMatchObject({ ok: true, call_id: saveId, data: { stored: true } });
  expect(completed.payload.downstream).toEqual({ transport: "in_process" });
  expect(save("result_attached").payload).toMatchObject({ ok: true });

  // Every event is its owner's: the run's chains verify, signatures included.
  const verified = await stack.audit<{ ok: boolean; chains: { chain: string; ok: boolean; problem?: string }[] }>(`/v1/runs/${runId}/verify`);
  expect(verified.body.chains.filter((c) => !c.ok)).toEqual([]);
  expect(verified.body.ok).toBe(true);
  const { body } = await stack.audit<{ events: { digest?: string; signature?: string; event: Event }[] }>(`/v1/calls/${saveId}/events`);
  for (const record of body.events) {
    expect(record.digest, record.event.type).toMatch(/^[0-9a-f]{64}$/);
    expect(record.signature, record.event.type).toMatch(/^v1 [0-9a-f]{16} [A-Za-z0-9_-]{86}$/);
  }
});
