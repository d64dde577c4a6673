import { randomUUID } from "node:crypto";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { callTool, callTools, resultOf, Stack, testInfra, waitFor, settledCallEvents } from "@toolgate/testkit";
import { MongoClient, type Db } from "mongodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// At most one effect per idempotency key when the same call arrives many times at once, and when different
// calls name the same business operation; one answer for a read whose copies all ran.

let stack: Stack;
let mongo: MongoClient;
let tools: Db;
let nc: NatsConnection;

beforeAll(async () => {
  const infra = testInfra();
  // No executor yet: the first test queues its duplicates before any executor consumes them.
  stack = await Stack.start({ natsUrl: infra.natsUrl, mongoUrl: infra.mongoUrl, toolsets: ["chaos"], executors: 0 });
  mongo = await new MongoClient(infra.mongoUrl).connect();
  tools = mongo.db(`${stack.name}_tools`);
  nc = await connect({ servers: infra.natsUrl });
});

afterAll(async () => {
  await nc?.close();
  await stack?.stop();
  await tools?.dropDatabase();
  await mongo?.db(`${stack.name}_runtime`).dropDatabase();
  await mongo?.close();
});

/** Seven more copies of a call's signed authorization, each with its own message id so the stream keeps them all. */
async function copiesOfAuthorization(callId: string): Promise<void> {
  const jsm = await jetstreamManager(nc);
  const subject = `${stack.name}.call.${callId}.authorized`;
  const authorized = await waitFor(async () => (await jsm.streams.getMessage(stack.eventStream, { last_by_subj: subject }).catch(() => null)) ?? undefined, {
    description: "policy's signed authorization",
  });
  const js = jetstream(nc);
  const acks = await Promise.all(
    Array.from({ length: 7 }, (_, i) => js.publish(subject, authorized.data, { msgID: `copy-${i}-${callId}`, headers: authorized.header })),
  );
  expect(acks.every((a) => !a.duplicate)).toBe(true);
}

async function everyCopyAcknowledged(): Promise<void> {
  const jsm = await jetstreamManager(nc);
  await waitFor(
    async () => {
      const info = await jsm.consumers.info(stack.eventStream, "executor");
      return info.num_pending === 0 && info.num_ack_pending === 0;
    },
    { description: "all 8 copies acknowledged", timeoutMs: 30_000 },
  );
}

describe("the same read delivered 8 times at once", () => {
  // Each copy is a first delivery, so each runs the read before its key is claimed and publishes its answer
  // alongside storing the key (the key is the call's own): the stream keeps one answer under its event id.
  it("ends with one answer in the stream and one stored key; every copy is acknowledged", async () => {
    const { callId } = await callTool(stack, "chaos_write_status", { idempotency_key: `probe-${randomUUID()}` }, { waitMs: 0 });
    await copiesOfAuthorization(callId);

    const readers = await Promise.all([1, 2, 3].map((i) => stack.startService("executor", `reader-${i}`)));
    expect(await resultOf(stack, callId)).toMatchObject({ ok: true, data: { state: "not_applied" } });
    await everyCopyAcknowledged();
    const events = await settledCallEvents(stack, callId);
    expect(events.filter((e) => ["completed", "outcome_unknown"].includes(e.type)).map((e) => e.id)).toEqual([`${callId}:completed:1`]);
    expect(events.filter((e) => e.type === "started").map((e) => e.id)).toEqual([`${callId}:started:1`]);
    expect(await mongo.db(`${stack.name}_runtime`).collection("idempotency_keys").countDocuments({ call_id: callId })).toBe(1);
    // The next test queues its copies before any executor runs.
    await Promise.all(readers.map((r) => r.stop()));
  });
});

describe("the same call delivered 8 times at once", () => {
  it("has one effect, one start and one terminal event; every copy is acknowledged", async () => {
    const { runId, callId } = await callTool(stack, "chaos_write", { n: 42, delay_ms: 300, effect: "after_delay" }, { waitMs: 0 });
    // What at-least-once delivery and duplicate publishes look like to the executors.
    await copiesOfAuthorization(callId);

    await Promise.all([1, 2, 3].map((i) => stack.startService("executor", `executor-${i}`)));
    const result = await resultOf(stack, callId);
    expect(result).toMatchObject({ ok: true, data: { n: 42 } });
    await everyCopyAcknowledged();
    const key = `chaos_write:${runId}:${callId}`;
    expect(await tools.collection("effects").countDocuments({ idempotency_key: key })).toBe(1);
    const events = await settledCallEvents(stack, callId);
    expect(events.filter((e) => e.type === "started")).toHaveLength(1);
    expect(events.filter((e) => ["completed", "outcome_unknown"].includes(e.type)).map((e) => e.id)).toEqual([`${callId}:completed:1`]);
    // Every duplicate did reach an executor: it waited for the key, then replayed the stored result.
    const replays = stack.processes.flatMap((p) => p.logs()).filter((l) => l.msg === "replayed the stored result of a completed key" && l.call_id === callId);
    expect(replays).toHaveLength(7);
  });
});

describe("a business idempotency key", () => {
  it("runs 8 concurrent calls of one business operation once and replays the result to the other 7", async () => {
    const calls = await Promise.all(Array.from({ length: 8 }, () => callTool(stack, "chaos_keyed_write", { order_id: "ord-1", amount: 100 })));
    const results = calls.map((c) => c.result!);
    expect(results.every((r) => r.ok)).toBe(true);
    expect(new Set(results.map((r) => JSON.stringify(r.data))).size).toBe(1);
    expect(results.filter((r) => r.replayed !== true)).toHaveLength(1);
    expect(results.filter((r) => r.replayed === true)).toHaveLength(7);
    // Each call keeps its own call id in its result.
    expect(results.map((r) => r.call_id).sort()).toEqual(calls.map((c) => c.callId).sort());
    expect(await tools.collection("effects").countDocuments({ idempotency_key: 'chaos_keyed_write:acme:"ord-1"' })).toBe(1);
  });

  it("answers IDEMPOTENCY_CONFLICT for the same key with other arguments, and has no second effect", async () => {
    const { result } = await callTool(stack, "chaos_keyed_write", { order_id: "ord-1", amount: 999 });
    expect(result).toMatchObject({ ok: false, error: { code: "IDEMPOTENCY_CONFLICT" }, retryable: false });
    expect(await tools.collection("effects").countDocuments({ idempotency_key: 'chaos_keyed_write:acme:"ord-1"' })).toBe(1);
    const other = await callTool(stack, "chaos_keyed_write", { order_id: "ord-2", amount: 999 });
    expect(other.result).toMatchObject({ ok: true, data: { order_id: "ord-2", amount: 999 } });
  });

  it("never takes a key from the model: an argument naming one is refused", async () => {
    const { result } = await callTool(stack, "chaos_keyed_write", { order_id: "ord-3", amount: 1, idempotency_key: "mine" });
    expect(result).toMatchObject({ ok: false, error: { code: "INVALID_ARGUMENTS" } });
  });
});

describe("a read's record in the stream", () => {
  // Its answer goes out right behind its `started` on one connection, without waiting for the stream to
  // acknowledge the start: the stream still stores the start first.
  it("stores each read's started before its completed", async () => {
    const calls = await callTools(
      stack,
      Array.from({ length: 12 }, (_, i) => ({ name: "chaos_write_status", arguments: { idempotency_key: `order-trail-${i}` } })),
    );
    const jsm = await jetstreamManager(nc);
    const seqOf = async (callId: string, type: string): Promise<number> => {
      const stored = await jsm.streams.getMessage(stack.eventStream, { last_by_subj: `${stack.name}.call.${callId}.${type}` });
      if (!stored) throw new Error(`no ${type} event of ${callId} in the stream`);
      return stored.seq;
    };
    for (const { callId, result } of calls) {
      expect(result).toMatchObject({ ok: true });
      expect(await seqOf(callId, "started")).toBeLessThan(await seqOf(callId, "completed"));
    }
  });
});
