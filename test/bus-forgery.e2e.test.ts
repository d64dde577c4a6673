import { generateKeyPairSync } from "node:crypto";
import { jetstream } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { canonicalHash, eventId, eventSigner, newCallId, nextCallEvent, type CallEvent, type Decision, type ToolgateEvent } from "@toolgate/contracts";
import { Stack, callEvents, resultOf, settledCallEvents, testInfra, waitFor, waitForCallEvents, type AuditedEvent, type CallResult } from "@toolgate/testkit";
import { MongoClient } from "mongodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// The second line of defence: a connection that may publish anything on the stack's subjects (as if the
// server's permissions were relaxed) forges the transitions of issue 11. Every service refuses what the
// service owning the transition did not sign, nothing changes, the legitimate path still completes, and
// audit's verification names each forgery with its position.
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

type Event = AuditedEvent["event"] & { principal?: unknown; args_hash?: string };
interface Verification {
  ok: boolean;
  brokenAt?: number;
  problem?: string;
  untrusted?: { idx: number; event_id: string; type: string; problem: string }[];
}

const save = (taskId: string, claim: string) => ({ task_id: taskId, claim, source_url: DOC });
const evidence = (filter: Record<string, unknown>) => mongo.db(`${stack.name}_tools`).collection("evidence").countDocuments(filter);
/** A key nobody trusts, used the way an attacker with publish rights would. */
const mallory = eventSigner("policy", generateKeyPairSync("ed25519").privateKey);

async function forge(event: ToolgateEvent & CallEvent, msgId = event.id): Promise<void> {
  await jetstream(nc).publish(`${stack.name}.call.${event.call_id}.${event.type}`, JSON.stringify(event), { msgID: msgId });
}

/** Waits until `service` logged that it refused the message on `subject` as untrusted: it acknowledged it and acted on nothing. */
async function refusedBy(service: string, subject: string): Promise<void> {
  const proc = stack.process(service);
  await waitFor(
    () =>
      proc
        .logs()
        .some((l) => l.msg === "message rejected" && l.subject === subject && (l.rejection as { reason?: string } | undefined)?.reason === "untrusted"),
    { description: `${service} refusing the forged message on ${subject}`, timeoutMs: 20_000 },
  );
}

async function taintedRun(taskId: string): Promise<string> {
  const body = { context: { task_id: taskId }, calls: [{ id: "h1", name: "fetch_document", arguments: { url: DOC } }], wait_ms: 30_000 };
  const read = await stack.api<{ run_id: string; results: { result?: CallResult }[] }>("POST", "/v1/tool-calls", body);
  expect(read.body.results[0]!.result?.ok).toBe(true);
  return read.body.run_id;
}

let saves = 0;
async function pendingSave(runId: string, args: Record<string, unknown>): Promise<{ callId: string; requested: Event }> {
  const body = { run_id: runId, calls: [{ id: `h2_${++saves}`, name: "save_evidence", arguments: args }], wait_ms: 0 };
  const submitted = await stack.api<{ results: { call_id: string }[] }>("POST", "/v1/tool-calls", body);
  expect(submitted.status).toBe(202);
  const callId = submitted.body.results[0]!.call_id;
  const events = (await waitForCallEvents(stack, callId, (es) => es.some((e) => e.type === "approval_requested"))) as Event[];
  return { callId, requested: events.find((e) => e.type === "approval_requested")! };
}

async function approvalState(callId: string): Promise<string | undefined> {
  const listed = await stack.policyApi<{ approvals: { state: string }[] }>("GET", `/v1/approvals?call_id=${callId}`);
  return listed.body.approvals[0]?.state;
}

async function approve(requested: Event): Promise<void> {
  const { approval_id, plan_hash } = requested.payload as { approval_id: string; plan_hash: string };
  const approved = await stack.policyApi<{ approval: { state: string } }>("POST", `/v1/approvals/${approval_id}/approve`, { plan_hash, reason: "checked" });
  expect([approved.status, approved.body.approval.state]).toEqual([200, "approved"]);
}

async function verification(callId: string): Promise<Verification> {
  return (await stack.audit<Verification>(`/v1/calls/${callId}/verify`)).body;
}

describe("forged transitions on the bus", () => {
  it("a forged proposed (taint false, another task's context) is refused by policy: nothing is authorized or written", async () => {
    const runId = await taintedRun("task_mine");
    const proposed = (await callEvents(stack, (await pendingSave(runId, save("task_mine", "A claim."))).callId)).find((e) => e.type === "proposed")!;
    const callId = newCallId();
    const args = save("task_other", "Planted by a forger.");
    const forged = nextCallEvent({ call_id: callId, run_id: runId, principal: (proposed as Event).principal as never, seq: 0 }, "proposed", "orchestrator", {
      provider_call_id: "forged_1",
      tool_name: "save_evidence",
      arguments_json: JSON.stringify(args),
      context: { task_id: "task_other" },
      turn: 1,
      taint: { tainted: false, sources: [] },
    });
    // Unsigned, then signed by an untrusted key, then signed by a trusted key of the wrong role (policy's): each refused.
    await forge(forged);
    await forge(eventSigner("orchestrator", generateKeyPairSync("ed25519").privateKey).seal(forged), `${forged.id}-rogue`);
    await forge(stack.signers.policy.seal(forged), `${forged.id}-policy`);
    const subject = `${stack.name}.call.${callId}.proposed`;
    await refusedBy("policy", subject);
    const stored = await waitForCallEvents(stack, callId, (es) => es.length === 3, { description: "audit holding the three forged proposals" });
    expect(stored.map((e) => e.type)).toEqual(["proposed", "proposed", "proposed"]);
    const verified = await verification(callId);
    expect(verified.ok).toBe(false);
    expect(verified.brokenAt).toBe(1);
    // Audit stores them in the order its parallel handlers got to them; each is listed with its position.
    expect(verified.untrusted?.map((u) => u.idx)).toEqual([1, 2, 3]);
    expect(verified.untrusted?.map((u) => `${u.type} ${/^refused: (\w+)/.exec(u.problem)?.[1]}`).sort()).toEqual([
      "proposed unknown_key",
      "proposed unsigned",
      "proposed wrong_role",
    ]);
    // Policy acted on none of them: every message policy handled for this call was refused, and nothing
    // was authorized, rejected or held for approval (audit stores every event, so it would hold them).
    expect(
      stack
        .process("policy")
        .logs()
        .filter((l) => l.subject === subject)
        .every((l) => l.msg === "message rejected" || l.alert === "untrusted_event"),
    ).toBe(true);
    expect((await callEvents(stack, callId)).every((e) => e.type === "proposed")).toBe(true);
    expect(await evidence({ task_id: "task_other" })).toBe(0);
    const rejected = await stack.audit<{ rejected: { subject: string; reason: string }[] }>("/v1/rejected?limit=100");
    expect(rejected.body.rejected.filter((r) => r.subject === subject && r.reason === "untrusted")).toHaveLength(3);

    // The legitimate path still works in the same run.
    const legit = await stack.api<{ results: { call_id: string; result?: CallResult }[] }>("POST", "/v1/tool-calls", {
      run_id: runId,
      calls: [{ id: "h_read", name: "fetch_document", arguments: { url: DOC } }],
      wait_ms: 30_000,
    });
    expect(legit.body.results[0]!.result?.ok).toBe(true);
    expect((await verification(legit.body.results[0]!.call_id)).ok).toBe(true);
  });

  it("a forged completed for a call waiting for approval ends nothing; once approved, the real result is recorded under the same event id", async () => {
    const runId = await taintedRun("task_completed");
    const { callId, requested } = await pendingSave(runId, save("task_completed", "Sessions keep conversation state."));
    const origin = (await callEvents(stack, callId)).find((e) => e.type === "approval_requested") as Event;
    const forged = nextCallEvent(
      { call_id: callId, run_id: runId, principal: origin.principal as never, seq: origin.seq + 3 },
      "completed",
      "executor",
      { result: { ok: true, data: { evidence_id: "ev_0000000000000000", stored: true }, retryable: false, call_id: callId }, duration_ms: 1 },
      { attempt: 1 },
    );
    // The id the executor's own completion will carry, with the Nats-Msg-Id a forger would guess for it.
    expect(forged.id).toBe(eventId(callId, "completed", 1));
    await forge(forged);
    await forge(mallory.seal({ ...forged, source: "executor" }), `${forged.id}~x`);
    await refusedBy("orchestrator", `${stack.name}.call.${callId}.completed`);
    // Even the executor's own key does not make a result for other arguments this call's outcome: it is bound to
    // the authorized argument hash. (Another attempt's id, so audit keeps the real first one apart.)
    const unbound = stack.signers.executor.seal(
      nextCallEvent({ call_id: callId, run_id: runId, principal: origin.principal as never, seq: origin.seq + 5 }, "completed", "executor", forged.payload, {
        attempt: 2,
        ...(origin.tool ? { tool: origin.tool as never } : {}),
        args_hash: canonicalHash({ other: "arguments" }),
      }),
    );
    await forge(unbound, `${unbound.id}-unbound`);
    await waitFor(
      () =>
        stack
          .process("orchestrator")
          .logs()
          .some((l) => l.alert === "unbound_result" && l.event_id === unbound.id),
      {
        description: "the orchestrator refusing a result bound to other arguments",
      },
    );
    const status = await stack.api<{ status: string; result?: unknown }>("GET", `/v1/tool-calls/${callId}`);
    expect(status.body).toMatchObject({ status: "pending" });
    expect(status.body.result).toBeUndefined();
    expect(await approvalState(callId)).toBe("pending");

    await approve(requested);
    const result = await resultOf(stack, callId);
    expect(result).toMatchObject({ ok: true, data: { stored: true } });
    expect((result as { data: { evidence_id: string } }).data.evidence_id).not.toBe("ev_0000000000000000");
    expect(await evidence({ task_id: "task_completed" })).toBe(1);
    const events = (await settledCallEvents(stack, callId)) as Event[];
    const completions = events.filter((e) => e.type === "completed");
    expect(completions).toHaveLength(4);
    const audited = (await stack.audit<{ events: { idx: number; event: Event; trust?: { ok: boolean } }[] }>(`/v1/calls/${callId}/events`)).body.events;
    const genuine = audited.filter((r) => r.event.type === "completed" && r.trust?.ok === true);
    expect(genuine.map((r) => r.event.id).sort()).toEqual([forged.id, unbound.id].sort());
    const verified = await verification(callId);
    expect(verified.ok).toBe(false);
    expect(verified.untrusted?.map((u) => u.type)).toEqual(["completed", "completed"]);
    expect(verified.untrusted?.map((u) => u.idx)).toEqual(audited.filter((r) => r.event.type === "completed" && r.trust?.ok !== true).map((r) => r.idx));
  });

  it("a bogus-signature authorized while an approval is pending ends nothing and consumes nothing; approving it then runs the call once", async () => {
    const runId = await taintedRun("task_authorized");
    const args = save("task_authorized", "Sessions keep conversation state.");
    const { callId, requested } = await pendingSave(runId, args);
    const origin = (await callEvents(stack, callId)).find((e) => e.type === "approval_requested") as Event;
    const { approval_id, plan_hash } = requested.payload as { approval_id: string; plan_hash: string };
    const now = Date.now();
    const decision: Decision = {
      decision_id: `dec_${callId.slice(5)}`,
      call_id: callId,
      run_id: runId,
      tool: origin.tool as Decision["tool"],
      args_hash: origin.args_hash ?? canonicalHash(args),
      principal: origin.principal as Decision["principal"],
      context: { task_id: "task_authorized" },
      policy_version: "forged",
      issued_at: new Date(now).toISOString(),
      expires_at: new Date(now + 60_000).toISOString(),
      key_id: stack.policySigner.keyId,
      approval: { approval_id, plan_hash },
    };
    const authorized = nextCallEvent(
      { call_id: callId, run_id: runId, principal: decision.principal, seq: origin.seq + 1 },
      "authorized",
      "policy",
      { decision, signature: "A".repeat(86), arguments: args },
      { tool: decision.tool, args_hash: decision.args_hash },
    );
    // Claims the policy key's id with a signature that key never made, on envelope and decision alike.
    await forge({ ...authorized, sig: { key_id: stack.signers.policy.keyId, value: "A".repeat(86) } });
    await refusedBy("executor-1", `${stack.name}.call.${callId}.authorized`);
    // The executor verified it (audit only will when asked) and raised the alert.
    expect(
      stack
        .process("executor-1")
        .logs()
        .some((l) => l.alert === "untrusted_event" && l.event_id === authorized.id && String(l.detail).startsWith("bad_signature")),
    ).toBe(true);
    expect((await stack.api<{ status: string }>("GET", `/v1/tool-calls/${callId}`)).body.status).toBe("pending");
    expect(await approvalState(callId)).toBe("pending");
    expect(await evidence({ task_id: "task_authorized" })).toBe(0);

    await approve(requested);
    const result = await resultOf(stack, callId);
    expect(result).toMatchObject({ ok: true, data: { stored: true } });
    expect(await evidence({ task_id: "task_authorized" })).toBe(1);
    const events = (await settledCallEvents(stack, callId)) as Event[];
    expect(events.filter((e) => e.type === "started")).toHaveLength(1);
    expect(events.filter((e) => e.type === "completed").map((e) => e.id)).toEqual([eventId(callId, "completed", 1)]);
    const verified = await verification(callId);
    expect(verified.ok).toBe(false);
    expect(verified.untrusted).toHaveLength(1);
    // Audit verifies no signature on arrival (the forgery came first and kept the event id; the real authorization
    // is stored under an id of its own): verification finds the forgery, at its position.
    expect(verified.untrusted![0]).toMatchObject({ type: "authorized", problem: expect.stringMatching(/^bad_signature/) });
    expect(verified.brokenAt).toBe(verified.untrusted![0]!.idx);
  });
});
