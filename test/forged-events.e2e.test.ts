import { generateKeyPairSync } from "node:crypto";
import { jetstream } from "@nats-io/jetstream";
import { headers as natsHeaders } from "@nats-io/nats-core";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { EVENT_SIGNATURE_HEADER, eventId, eventSigner, messageDigest, newCallId, success, type EventSigner } from "@toolgate/contracts";
import { Stack, resultOf, testInfra, waitFor, waitForCallEvents, type AuditedEvent, type CallResult } from "@toolgate/testkit";
import { MongoClient } from "mongodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// The second line of defence behind the NATS permissions: a connection with every right (the dev server's local
// tools, i.e. permissions relaxed) publishes forgeries of the transitions that matter. Every consumer acts only on
// events signed by a key of their owner's role: each forgery is refused, reported, changes no state, and the
// legitimate call still completes correctly afterwards; audit's verify flags each one.
const DOC = "https://example.test/docs/openai-agents-sdk/sessions";

let stack: Stack;
let nc: NatsConnection;
let mongo: MongoClient;
/** An attacker's own key, presented as the orchestrator's and the executor's. */
let mallory: { orchestrator: EventSigner; executor: EventSigner };

beforeAll(async () => {
  const infra = testInfra();
  stack = await Stack.start({ natsUrl: infra.natsUrl, mongoUrl: infra.mongoUrl, ruleOfTwo: true });
  nc = await connect({ servers: infra.natsUrl });
  mongo = await new MongoClient(infra.mongoUrl).connect();
  const key = generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "pem" }).toString();
  mallory = { orchestrator: eventSigner(key, "orchestrator"), executor: eventSigner(key, "executor") };
});

afterAll(async () => {
  await nc?.close();
  await stack?.stop();
  await mongo?.db(`${stack.name}_runtime`).dropDatabase();
  await mongo?.db(`${stack.name}_tools`).dropDatabase();
  await mongo?.close();
});

type Event = AuditedEvent["event"] & { principal: unknown; payload: Record<string, unknown> };
const save = (taskId: string, claim: string) => ({ task_id: taskId, claim, source_url: DOC });
const evidence = (filter: Record<string, unknown>) => mongo.db(`${stack.name}_tools`).collection("evidence").countDocuments(filter);

/** Publishes `event` under its own id as message id (what the real owner will use), signed by `signer` or not at all. */
async function forge(event: Record<string, unknown> & { call_id: string; type: string; id: string }, signer?: EventSigner): Promise<void> {
  const data = JSON.stringify(event);
  const h = natsHeaders();
  if (signer) h.set(EVENT_SIGNATURE_HEADER, signer.sign(messageDigest(new TextEncoder().encode(data))));
  const ack = await jetstream(nc).publish(`${stack.name}.call.${event.call_id}.${event.type}`, data, { msgID: event.id, headers: h });
  expect(ack.duplicate).toBe(false);
}

async function auditOf(callId: string): Promise<Event[]> {
  const { body } = await stack.audit<{ events: { event: Event }[] }>(`/v1/calls/${callId}/events`);
  return body.events.map((e) => e.event);
}

async function verifyOf(callId: string): Promise<{ ok: boolean; brokenAt?: number; problem?: string }> {
  return (await stack.audit<{ ok: boolean; brokenAt?: number; problem?: string }>(`/v1/calls/${callId}/verify`)).body;
}

/** Waits for `reporter`'s report of the refused event `refusedId` in the call's audit chain. */
async function refusalReport(callId: string, refusedId: string, reporter: string): Promise<Event> {
  return waitFor(
    async () => (await auditOf(callId)).find((e) => e.type === "event_refused" && e.source === reporter && e.payload.refused_event_id === refusedId),
    { description: `${reporter}'s report of ${refusedId}` },
  );
}

describe("forged transitions on a bus without permissions", () => {
  it("refuses a forged proposal into another task: nothing is decided, nothing is written, audit flags it", async () => {
    const principal = { tenant: "acme", subject: "alice", roles: ["researcher"] };
    const { body: run } = await stack.api<{ run_id: string }>("POST", "/v1/tool-calls", {
      context: { task_id: "task_mine" },
      calls: [{ id: "r1", name: "search_sources", arguments: { query: "sessions", source_type: "docs", limit: 1 } }],
      wait_ms: 30_000,
    });
    const cases = [
      { signer: undefined, reason: "unsigned" },
      { signer: mallory.orchestrator, reason: "unknown_key" },
    ];
    for (const c of cases) {
      const callId = newCallId();
      const proposed = {
        v: 1,
        kind: "call",
        id: eventId(callId, "proposed", 1),
        type: "proposed",
        call_id: callId,
        run_id: run.run_id,
        seq: 1,
        attempt: 1,
        time: new Date().toISOString(),
        source: "orchestrator",
        principal,
        payload: {
          provider_call_id: `forged_${c.reason}`,
          tool_name: "save_evidence",
          arguments_json: JSON.stringify(save("task_other", `forged ${c.reason}`)),
          context: { task_id: "task_other" },
          turn: 0,
          taint: { tainted: false, sources: [] },
        },
      };
      await forge(proposed, c.signer);
      const report = await refusalReport(callId, proposed.id, "policy");
      expect(report.payload).toMatchObject({ refused_type: "proposed", claimed_source: "orchestrator", reason: c.reason });
      // Policy decided nothing: the chain holds the forgery and its report, no decision, no approval request.
      expect((await auditOf(callId)).map((e) => e.type)).toEqual(["proposed", "event_refused"]);
      const verified = await verifyOf(callId);
      expect(verified).toMatchObject({ ok: false, brokenAt: 1 });
      expect(verified.problem).toContain(`call.proposed ${proposed.id}`);
    }
    expect(await evidence({ task_id: "task_other" })).toBe(0);
    const policy = stack.process("policy");
    expect(policy.logs().filter((l) => l.msg === "event refused: not signed by its owner")).toHaveLength(cases.length);
  });

  it("refuses a forged authorization and a forged result of a call waiting for approval; approving it runs the real call once", async () => {
    // A tainted run: its save_evidence waits for a human.
    const read = await stack.api<{ run_id: string; results: { result?: CallResult }[] }>("POST", "/v1/tool-calls", {
      context: { task_id: "task_forged" },
      calls: [{ id: "h1", name: "fetch_document", arguments: { url: DOC } }],
      wait_ms: 30_000,
    });
    expect(read.body.results[0]!.result?.ok).toBe(true);
    const args = save("task_forged", "Sessions keep conversation state.");
    const submitted = await stack.api<{ results: { call_id: string }[] }>("POST", "/v1/tool-calls", {
      run_id: read.body.run_id,
      calls: [{ id: "h2", name: "save_evidence", arguments: args }],
      wait_ms: 0,
    });
    const callId = submitted.body.results[0]!.call_id;
    const events = (await waitForCallEvents(stack, callId, (es) => es.some((e) => e.type === "approval_requested"))) as Event[];
    const requested = events.find((e) => e.type === "approval_requested")!;
    const common = { v: 1, kind: "call", call_id: callId, run_id: read.body.run_id, attempt: 1, principal: requested.principal, tool: requested.tool };

    // A bogus-signature authorization under the id policy will use, and a result under the executor's id.
    const authorized = {
      ...common,
      id: eventId(callId, "authorized", 1),
      type: "authorized",
      seq: requested.seq + 2,
      time: new Date().toISOString(),
      source: "policy",
      payload: {
        decision: {
          decision_id: "dec_forged",
          call_id: callId,
          run_id: read.body.run_id,
          tool: requested.tool,
          args_hash: `sha256:${"1".repeat(64)}`,
          principal: requested.principal,
          context: { task_id: "task_forged" },
          policy_version: "forged",
          issued_at: new Date().toISOString(),
          expires_at: new Date(Date.now() + 60_000).toISOString(),
          key_id: stack.policySigner.keyId,
        },
        signature: "A".repeat(86),
        arguments: args,
      },
    };
    const completed = {
      ...common,
      id: eventId(callId, "completed", 1),
      type: "completed",
      seq: requested.seq + 4,
      time: new Date().toISOString(),
      source: "executor",
      payload: { result: success(callId, { evidence_id: "ev_0000000000000000", stored: true }), duration_ms: 1 },
    };
    await forge(authorized);
    await forge(completed, mallory.executor);
    expect((await refusalReport(callId, authorized.id, "executor")).payload).toMatchObject({ reason: "unsigned", claimed_source: "policy" });
    expect((await refusalReport(callId, completed.id, "orchestrator")).payload).toMatchObject({ reason: "unknown_key", claimed_source: "executor" });

    // Nothing changed: the call is still pending, its approval still open, nothing ran.
    const call = await stack.api<{ status: string; result?: unknown }>("GET", `/v1/tool-calls/${callId}`);
    expect(call.body.status).not.toBe("completed");
    expect(call.body.result).toBeUndefined();
    const approvals = await stack.policyApi<{ approvals: { state: string; plan_hash: string; approval_id: string }[] }>(
      "GET",
      `/v1/approvals?call_id=${callId}`,
    );
    expect(approvals.body.approvals[0]!.state).toBe("pending");
    expect(await evidence({ task_id: "task_forged" })).toBe(0);

    // The human approves: the real authorization and the real result are published (the forgeries took their
    // message ids first) and the call completes with what the tool actually stored.
    const approved = await stack.policyApi("POST", `/v1/approvals/${approvals.body.approvals[0]!.approval_id}/approve`, {
      plan_hash: approvals.body.approvals[0]!.plan_hash,
    });
    expect(approved.status).toBe(200);
    const result = await resultOf(stack, callId);
    expect(result).toMatchObject({ ok: true, data: { stored: true } });
    expect((result as { data: { evidence_id: string } }).data.evidence_id).not.toBe("ev_0000000000000000");
    expect(await evidence({ task_id: "task_forged" })).toBe(1);
    const taken = (service: string) =>
      stack
        .process(service)
        .logs()
        .filter((l) => l.msg === "event id taken by a message its owner did not sign; published under another message id");
    expect(taken("policy").map((l) => l.event_id)).toEqual([authorized.id]);
    expect(taken("executor-1").map((l) => l.event_id)).toEqual([completed.id]);

    // Audit keeps both the forgeries and the real transitions, and its verification flags the first forgery.
    const trail = await waitFor(
      async () => {
        const all = await auditOf(callId);
        return all.some((e) => e.type === "result_attached") ? all : undefined;
      },
      { description: "the real call's whole trail in audit" },
    );
    expect(trail.filter((e) => e.type === "authorized").map((e) => e.source)).toEqual(["policy", "policy"]);
    expect(trail.filter((e) => e.type === "completed")).toHaveLength(2);
    expect(trail.filter((e) => e.type === "started")).toHaveLength(1);
    const verified = await verifyOf(callId);
    expect(verified.ok).toBe(false);
    expect(verified.problem).toContain(`call.authorized ${authorized.id} (claimed by policy) is not signed by its owner: unsigned`);
    expect(verified.brokenAt).toBe(trail.findIndex((e) => e.type === "authorized") + 1);
  });

  it("verifies a chain of genuine events as signed by their owners", async () => {
    const { body } = await stack.api<{ results: { call_id: string; result?: CallResult }[] }>("POST", "/v1/tool-calls", {
      context: { task_id: "task_mine" },
      calls: [{ id: "ok1", name: "search_sources", arguments: { query: "state", source_type: "docs", limit: 1 } }],
      wait_ms: 30_000,
    });
    const callId = body.results[0]!.call_id;
    await waitFor(async () => ((await auditOf(callId)).some((e) => e.type === "result_attached") ? true : undefined), {
      description: "the call's trail in audit",
    });
    expect(await verifyOf(callId)).toMatchObject({ ok: true });
  });
});
