import { jetstream } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { eventId, newCallId, newRunId } from "@toolgate/contracts";
import { Stack, testInfra, waitFor, type ServiceProcess } from "@toolgate/testkit";
import { MongoClient } from "mongodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// Bad input from a model or a peer gets a typed, logged reason and never crashes a service.
const MAX_EVENT_BYTES = 64 * 1024;

let stack: Stack;
let nc: NatsConnection;
let mongo: MongoClient;

beforeAll(async () => {
  const infra = testInfra();
  // Services accept events up to 64 KiB while the stream stores up to 1 MiB: oversized events reach them.
  stack = await Stack.start({ natsUrl: infra.natsUrl, mongoUrl: infra.mongoUrl, extraEnv: { MAX_EVENT_BYTES: String(MAX_EVENT_BYTES) } });
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

const principal = { tenant: "acme", subject: "alice", roles: ["researcher"] };

function proposal(callId: string, runId: string, toolName: string, argumentsJson: string) {
  return {
    v: 1,
    kind: "call",
    id: eventId(callId, "proposed", 1),
    type: "proposed",
    call_id: callId,
    run_id: runId,
    seq: 1,
    attempt: 1,
    time: new Date().toISOString(),
    source: "orchestrator",
    principal,
    payload: { provider_call_id: "x1", tool_name: toolName, arguments_json: argumentsJson, context: { task_id: "task_c04" }, turn: 0 },
  };
}

async function publishRaw(subject: string, data: Uint8Array | string): Promise<void> {
  await jetstream(nc).publish(subject, typeof data === "string" ? new TextEncoder().encode(data) : data);
}

function rejectionsIn(proc: ServiceProcess, reason: string): number {
  return proc.logs().filter((l) => l.msg === "message rejected" && (l.rejection as { reason?: string } | undefined)?.reason === reason).length;
}

describe("malformed messages on every service's subject", () => {
  const cases = [
    { service: "policy", type: "proposed" },
    { service: "executor-1", type: "authorized" },
    { service: "orchestrator", type: "completed" },
  ] as const;

  for (const { service, type } of cases) {
    it(`${service} rejects not-JSON, a wrong envelope and an oversized payload on ${type}, and keeps running`, async () => {
      const subject = `${stack.name}.call.${newCallId()}.${type}`;
      await publishRaw(subject, "this is not json {");
      await publishRaw(subject, JSON.stringify({ v: 1, kind: "call", type, hello: "world" }));
      await publishRaw(subject, new Uint8Array(MAX_EVENT_BYTES + 1024).fill(0x20));
      const proc = stack.process(service);
      await waitFor(() => rejectionsIn(proc, "invalid_json") >= 1 && rejectionsIn(proc, "invalid_envelope") >= 1 && rejectionsIn(proc, "too_large") >= 1, {
        description: `${service} logging three typed rejections`,
      });
      expect(proc.exited).toBe(false);
      // Audit keeps every refused message with its reason, so nothing is lost silently.
      await waitFor(
        async () => {
          const { body } = await stack.audit<{ rejected: { subject: string; reason: string }[] }>("/v1/rejected?limit=1000");
          const mine = body.rejected.filter((r) => r.subject === subject).map((r) => r.reason);
          return mine.length === 3 ? mine.sort() : undefined;
        },
        { description: "audit recording the three rejected messages" },
      ).then((reasons) => expect(reasons).toEqual(["invalid_envelope", "invalid_json", "too_large"]));
    });
  }

  it("turns a proposal for an unknown tool into a typed UNKNOWN_TOOL outcome", async () => {
    const callId = newCallId();
    await stack.publishEvent(nc, `${stack.name}.call.${callId}.proposed`, JSON.stringify(proposal(callId, newRunId(), "rm_rf_everything", "{}")), {
      as: "orchestrator",
    });
    const events = await waitFor(
      async () => {
        const { body } = await stack.audit<{ events: { event: { type: string; payload: { result?: { error?: { code: string } } } } }[] }>(
          `/v1/calls/${callId}/events`,
        );
        return body.events.some((e) => e.event.type === "rejected") ? body.events : undefined;
      },
      { description: "the rejection of the unknown tool" },
    );
    // The orchestrator may attach the outcome to the call (its proposal in the stream is its record) before or
    // after audit is read: the trail is the proposal, its rejection and at most that attach.
    const types = events.map((e) => e.event.type);
    expect(types.slice(0, 2)).toEqual(["proposed", "rejected"]);
    expect(types.slice(2).every((t) => t === "result_attached") && types.length <= 3).toBe(true);
    expect(events[1]!.event.payload.result!.error!.code).toBe("UNKNOWN_TOOL");
  });

  it("refuses arguments above the contract's byte limit before parsing them", async () => {
    const callId = newCallId();
    const huge = JSON.stringify({ query: "x".repeat(40_000), source_type: "any", limit: 3 });
    await stack.publishEvent(nc, `${stack.name}.call.${callId}.proposed`, JSON.stringify(proposal(callId, newRunId(), "search_sources", huge)), {
      as: "orchestrator",
    });
    const rejected = await waitFor(
      async () => {
        const { body } = await stack.audit<{
          events: { event: { type: string; payload: { result?: { error: { code: string; details?: { violations: { keyword: string }[] } } } } } }[];
        }>(`/v1/calls/${callId}/events`);
        return body.events.find((e) => e.event.type === "rejected");
      },
      { description: "the rejection of the oversized arguments" },
    );
    expect(rejected.event.payload.result!.error.code).toBe("INVALID_ARGUMENTS");
    expect(rejected.event.payload.result!.error.details!.violations[0]!.keyword).toBe("maxBytes");
  });

  it.each([
    ["unsigned", undefined, "event refused: not signed by its owner"],
    ["signed by the orchestrator", "orchestrator", "event refused: not signed by its owner"],
    ["its decision signed by no policy key", "policy", "authorization refused"],
  ] as const)("refuses an authorization that policy did not sign (%s), and runs nothing", async (_case, signedAs, refusal) => {
    const callId = newCallId();
    const runId = newRunId();
    const args = { task_id: "task_c04", claim: "forged", source_url: "https://example.test/x" };
    const forged = {
      ...proposal(callId, runId, "save_evidence", "{}"),
      id: eventId(callId, "authorized", 1),
      type: "authorized",
      seq: 2,
      source: "policy",
      payload: {
        decision: {
          decision_id: "dec_forged",
          call_id: callId,
          run_id: runId,
          tool: { name: "save_evidence", version: "1.0.0", hash: `sha256:${"0".repeat(64)}` },
          args_hash: `sha256:${"1".repeat(64)}`,
          principal,
          context: { task_id: "task_c04" },
          policy_version: "forged",
          issued_at: new Date().toISOString(),
          expires_at: new Date(Date.now() + 60_000).toISOString(),
          key_id: "0000000000000000",
        },
        signature: "AAAA",
        arguments: args,
      },
    };
    await stack.publishEvent(nc, `${stack.name}.call.${callId}.authorized`, JSON.stringify(forged), signedAs ? { as: signedAs } : {});
    const executor = stack.process("executor-1");
    await waitFor(() => executor.logs().some((l) => l.msg === refusal && (l.call_id === callId || l.event_id === forged.id)), {
      description: "the executor refusing the forged authorization",
    });
    const evidence = await mongo.db(`${stack.name}_tools`).collection("evidence").countDocuments({ claim: "forged" });
    expect(evidence).toBe(0);
    if (signedAs === "policy") return;
    // Refused by the bus before any handler: reported in the call's chain, and no terminal event for anyone.
    const events = await waitFor(
      async () => {
        const { body } = await stack.audit<{ events: { event: { type: string; source: string; payload: { refused_event_id?: string; reason?: string } } }[] }>(
          `/v1/calls/${callId}/events`,
        );
        return body.events.some((e) => e.event.type === "event_refused") ? body.events : undefined;
      },
      { description: "the executor's report of the refused authorization in audit" },
    );
    expect(events.map((e) => e.event.type)).toEqual(["authorized", "event_refused"]);
    expect(events[1]!.event).toMatchObject({
      source: "executor",
      payload: { refused_event_id: forged.id, reason: signedAs ? "signer_not_owner" : "unsigned" },
    });
  });

  it("still runs the C04 case after all of that", async () => {
    const run = await stack.runToEnd("scripted:c04", "Research task task_id=task_c04: state management.", { task_id: "task_c04" });
    expect(run.status).toBe("completed");
    expect(run.calls.every((c) => c.result?.ok === true)).toBe(true);
    for (const p of stack.processes) expect(p.exited, `${p.name} exited`).toBe(false);
  });
});
