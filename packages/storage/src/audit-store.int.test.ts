import { generateKeyPairSync } from "node:crypto";
import {
  eventId,
  eventSigner,
  exportKeyPair,
  newCallId,
  newRunId,
  sha256,
  success,
  trustedKeys,
  type CallEventType,
  type ToolgateEvent,
} from "@toolgate/contracts";
import { testDatabase, testInfra, uniqueName } from "@toolgate/testkit";
import { MongoClient, type Db } from "mongodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MongoAuditStore, recordHash, signatureVerdict } from "./audit-store.js";

const principal = { tenant: "acme", subject: "alice", roles: ["analyst"] };
const tool = { name: "create_ticket", version: "1", hash: `sha256:${"a".repeat(64)}` };
const hash = (c: string): string => `sha256:${c.repeat(64)}`;

let database: Awaited<ReturnType<typeof testDatabase>>;
let db: Db;

beforeAll(async () => {
  database = await testDatabase();
  db = database.db;
});
afterAll(async () => {
  await database.dispose();
});

/** A store on its own collection, indexes created; `reopen` gives a fresh instance on the same data (a restart). */
async function freshStore(): Promise<{ store: MongoAuditStore; collection: string; reopen(): Promise<MongoAuditStore> }> {
  const collection = uniqueName("audit_");
  const open = async (): Promise<MongoAuditStore> => {
    const store = new MongoAuditStore(db, { collection });
    await store.ensureIndexes();
    return store;
  };
  return { store: await open(), collection, reopen: open };
}

const CALL_LIFECYCLE = ["proposed", "started", "completed", "result_attached"] as const satisfies readonly CallEventType[];

function callEvent(callId: string, runId: string, type: (typeof CALL_LIFECYCLE)[number], seq: number, data: unknown = { ticket: "T-1" }): ToolgateEvent {
  const common = {
    v: 1 as const,
    id: eventId(callId, type, 1),
    kind: "call" as const,
    call_id: callId,
    run_id: runId,
    seq,
    attempt: 1,
    time: new Date(Date.UTC(2024, 10, 29, 10, 0, seq)).toISOString(),
    principal,
    tool,
    args_hash: hash("b"),
  };
  switch (type) {
    case "proposed":
      return {
        ...common,
        type,
        source: "orchestrator",
        payload: { provider_call_id: "toolu_1", tool_name: "create_ticket", arguments_json: '{"title":"x"}', context: {}, turn: 0 },
      };
    case "started":
      return { ...common, type, source: "executor", payload: { executor_id: "executor-1", idempotency_key_hash: hash("d") } };
    case "completed":
      return { ...common, type, source: "executor", payload: { result: success(callId, data as never), duration_ms: 12.5 } };
    case "result_attached":
      return { ...common, type, source: "orchestrator", payload: { provider_call_id: "toolu_1", ok: true } };
  }
}

function lifecycle(callId = newCallId(), runId = newRunId()): ToolgateEvent[] {
  return CALL_LIFECYCLE.map((type, i) => callEvent(callId, runId, type, i + 1));
}

function runStarted(runId: string): ToolgateEvent {
  return {
    v: 1,
    id: eventId(runId, "started", 1),
    kind: "run",
    type: "started",
    run_id: runId,
    seq: 1,
    attempt: 1,
    time: "2024-11-29T10:00:00.000Z",
    source: "orchestrator",
    principal,
    payload: { model: "m", context: {} },
  };
}

const chainOf = (e: ToolgateEvent): string => (e.kind === "call" ? e.call_id : e.run_id);

/** A record as a ledger block stores it (the store's own type is not exported: tests edit the raw data). */
interface StoredRecord {
  id: string;
  chain_id: string;
  idx: number;
  prev_hash: string | null;
  hash: string;
  stream_seq: number;
  event_json: string;
}
interface StoredBlock {
  _id: string;
  n: number;
  prev_hash: string | null;
  hash: string;
  chain_id: string[];
  run_id: string[];
  records_json: string;
}

/**
 * Edits, directly in the database, the stored record of event `eventId` (as an attacker with write access
 * would); with `rehash` the block's own hash is recomputed too, so only the next block's link can tell.
 */
async function tamper(
  collection: string,
  eventId: string,
  edit: (records: StoredRecord[], index: number) => void,
  options: { rehash?: boolean } = {},
): Promise<void> {
  const raw = db.collection<StoredBlock>(collection);
  const block = (await raw.find({}).toArray()).find((b) => (JSON.parse(b.records_json) as StoredRecord[]).some((r) => r.id === eventId))!;
  const records = JSON.parse(block.records_json) as StoredRecord[];
  edit(
    records,
    records.findIndex((r) => r.id === eventId),
  );
  const records_json = JSON.stringify(records);
  const rehashed = options.rehash
    ? sha256(`${block.prev_hash ?? ""}\n${block.n}\n${block.chain_id.join(",")}\n${block.run_id.join(",")}\n${records_json}`)
    : block.hash;
  await raw.updateOne({ _id: block._id }, { $set: { records_json, hash: rehashed } });
}

describe("MongoAuditStore", () => {
  it("stores an event once; a redelivery is a duplicate", async () => {
    const { store } = await freshStore();
    const [proposed] = lifecycle();
    expect(await store.append(proposed!, 7)).toBe("stored");
    expect(await store.append(proposed!, 7)).toBe("duplicate");
    expect(await store.append(proposed!, 9)).toBe("duplicate");
    const chain = await store.chain(chainOf(proposed!));
    expect(chain).toHaveLength(1);
    expect(chain[0]).toMatchObject({
      _id: proposed!.id,
      chain_id: chainOf(proposed!),
      idx: 1,
      prev_hash: null,
      stream_seq: 7,
      kind: "call",
      type: "proposed",
      block: 1,
    });
    expect(chain[0]?.event).toEqual(proposed);
  });

  it("keeps a call's events in arrival order, linked by hash, and verifies the chain", async () => {
    const { store } = await freshStore();
    const events = lifecycle();
    for (const [i, e] of events.entries()) expect(await store.append(e, i + 1)).toBe("stored");
    const chainId = chainOf(events[0]!);
    const chain = await store.chain(chainId);
    expect(chain.map((r) => r.type)).toEqual([...CALL_LIFECYCLE]);
    expect(chain.map((r) => r.idx)).toEqual([1, 2, 3, 4]);
    expect(chain.map((r) => r.event)).toEqual(events);
    let prev: string | null = null;
    for (const r of chain) {
      expect(r.prev_hash).toBe(prev);
      expect(r.hash).toBe(recordHash(prev, chainId, r.idx, r.event));
      prev = r.hash;
    }
    expect(await store.verify(chainId)).toEqual({ ok: true, length: 4, head: prev });
    expect(await store.verify(newCallId())).toEqual({ ok: true, length: 0, head: null });
  });

  it("stores events whose data has keys Mongo treats specially, and still verifies them", async () => {
    const { store } = await freshStore();
    const callId = newCallId();
    const runId = newRunId();
    // Tool output is untrusted data: JSON Schema documents, dotted names and empty keys are ordinary JSON.
    const data = { $schema: "https://json-schema.org/draft/2020-12/schema", $ref: "#/defs/a", "a.b": { "": [1, { $where: "x" }] }, missing: null };
    const completed = callEvent(callId, runId, "completed", 3, data);
    expect(await store.append(callEvent(callId, runId, "proposed", 1), 1)).toBe("stored");
    expect(await store.append(completed, 2)).toBe("stored");
    const chain = await store.chain(callId);
    expect(chain[1]?.event).toEqual(completed);
    expect(await store.verify(callId)).toMatchObject({ ok: true, length: 2 });
  });

  it("fails verification at the record whose stored event was modified in the database", async () => {
    const { store, collection } = await freshStore();
    const events = lifecycle();
    for (const [i, e] of events.entries()) await store.append(e, i + 1);
    const chainId = chainOf(events[0]!);
    // Flip the duration inside the stored event: 12.5 ms becomes 1 ms.
    await tamper(collection, events[2]!.id, (records, i) => {
      records[i]!.event_json = records[i]!.event_json.replace('"duration_ms":12.5', '"duration_ms":1');
    });
    expect(await store.verify(chainId)).toMatchObject({ ok: false, length: 4, brokenAt: 3 });
  });

  it("fails verification when a record's own hash, its link or its metadata is rewritten, or a record is removed", async () => {
    const { store, collection } = await freshStore();
    const cases: [string, (records: StoredRecord[], i: number) => void, number, number][] = [
      ["rewritten hash", (records, i) => void (records[i]!.hash = hash("f")), 1, 2],
      ["rewritten link", (records, i) => void (records[i]!.prev_hash = hash("e")), 2, 3],
      ["relabelled event id", (records, i) => void (records[i]!.id = `${records[i]!.id}x`), 2, 3],
      ["removed record", (records, i) => void records.splice(i, 1), 1, 2],
    ];
    for (const [name, edit, target, brokenAt] of cases) {
      const events = lifecycle();
      for (const [i, e] of events.entries()) await store.append(e, i + 1);
      const chainId = chainOf(events[0]!);
      expect(await store.verify(chainId)).toMatchObject({ ok: true });
      await tamper(collection, events[target]!.id, edit);
      const verdict = await store.verify(chainId);
      expect({ name, verdict }).toMatchObject({ name, verdict: { ok: false, brokenAt } });
    }
  });

  it("catches a block rewritten with every hash recomputed, by the next block's link and in the whole ledger", async () => {
    const { store, collection } = await freshStore();
    const events = lifecycle();
    for (const [i, e] of events.entries()) await store.append(e, i + 1);
    const chainId = chainOf(events[0]!);
    expect(await store.verifyLedger()).toMatchObject({ ok: true, blocks: 4 });
    // A forger who knows the format rewrites the third event and makes its record and its block consistent again.
    await tamper(
      collection,
      events[2]!.id,
      (records, i) => {
        const r = records[i]!;
        r.event_json = r.event_json.replace('"duration_ms":12.5', '"duration_ms":1');
        r.hash = recordHash(r.prev_hash, chainId, r.idx, JSON.parse(r.event_json) as ToolgateEvent);
      },
      { rehash: true },
    );
    // Its own chain now breaks at the next record's link, and the ledger at the next block.
    expect(await store.verify(chainId)).toMatchObject({ ok: false, brokenAt: 4 });
    expect(await store.verifyLedger()).toMatchObject({ ok: false, brokenAt: 4 });
  });

  it("stores concurrent appends as few blocks, each event once, in one linked ledger", async () => {
    const { store, collection } = await freshStore();
    const runId = newRunId();
    const calls = Array.from({ length: 40 }, () => lifecycle(newCallId(), runId));
    const all = calls.flat();
    const outcomes = await Promise.all(all.map((e, i) => store.append(e, i + 1)));
    expect(outcomes.every((o) => o === "stored")).toBe(true);
    const blocks = await db.collection<StoredBlock>(collection).find({}).toArray();
    const ids = blocks.flatMap((b) => (JSON.parse(b.records_json) as StoredRecord[]).map((r) => r.id));
    expect(ids.sort()).toEqual(all.map((e) => e.id).sort());
    // Batched: what arrives while an insert is in flight shares the next block.
    expect(blocks.length).toBeLessThan(all.length / 4);
    expect(await store.verifyLedger()).toMatchObject({ ok: true, blocks: blocks.length });
  });

  it("builds correct chains from many concurrent appends over several calls", async () => {
    const { store } = await freshStore();
    const runId = newRunId();
    const calls = Array.from({ length: 12 }, () => lifecycle(newCallId(), runId));
    // Appends are issued interleaved across calls, each call's events in order, none awaited before the next.
    const order: ToolgateEvent[] = [];
    for (let step = 0; step < CALL_LIFECYCLE.length; step++) for (const events of calls) order.push(events[step]!);
    const outcomes = await Promise.all(order.map((e, i) => store.append(e, i + 1)));
    expect(outcomes.every((o) => o === "stored")).toBe(true);
    for (const events of calls) {
      const chainId = chainOf(events[0]!);
      const chain = await store.chain(chainId);
      expect(chain.map((r) => r.event.id)).toEqual(events.map((e) => e.id));
      expect(await store.verify(chainId)).toMatchObject({ ok: true, length: 4 });
    }
    const run = await store.run(runId);
    expect(run.map((r) => r.stream_seq)).toEqual(order.map((_, i) => i + 1));
  });

  it("keeps chains linear when two store instances (replicas) append to the same calls at once", async () => {
    const { store, reopen } = await freshStore();
    const replica = await reopen();
    const callIds = Array.from({ length: 6 }, () => newCallId());
    const runId = newRunId();
    // Every call starts on the first instance; both then append the rest concurrently, each event exactly once.
    for (const callId of callIds) await store.append(callEvent(callId, runId, "proposed", 1), 1);
    const rest = callIds.flatMap((callId) => CALL_LIFECYCLE.slice(1).map((type, i) => callEvent(callId, runId, type, i + 2)));
    const outcomes = await Promise.all(rest.map((e, i) => (i % 2 === 0 ? store : replica).append(e, 100 + i)));
    expect(outcomes.every((o) => o === "stored")).toBe(true);
    for (const callId of callIds) {
      const chain = await store.chain(callId);
      expect(chain.map((r) => r.idx)).toEqual([1, 2, 3, 4]);
      expect(new Set(chain.map((r) => r.type))).toEqual(new Set(CALL_LIFECYCLE));
      expect(await store.verify(callId)).toMatchObject({ ok: true, length: 4 });
    }
    // One ledger: the writers took turns at the head, never two blocks with one number or a fork.
    expect(await replica.verifyLedger()).toMatchObject({ ok: true });
  });

  it("reads nothing back for chains that start after the ledger's head, in one block or across blocks", async () => {
    const collection = uniqueName("audit_");
    const monitored = new MongoClient(testInfra().mongoUrl, { monitorCommands: true });
    await monitored.connect();
    try {
      const finds: unknown[] = [];
      monitored.on("commandStarted", (e) => {
        if (e.commandName === "find") finds.push(e.command);
      });
      const store = new MongoAuditStore(monitored.db(database.name), { collection });
      await store.ensureIndexes();
      await store.append(runStarted(newRunId()), 1); // locates the head of an empty ledger
      finds.length = 0;
      // A call's whole life in one batch, and more calls arriving one event at a time.
      const together = lifecycle();
      expect(await Promise.all(together.map((e, i) => store.append(e, 10 + i)))).toEqual(["stored", "stored", "stored", "stored"]);
      for (const [i, e] of lifecycle().entries()) expect(await store.append(e, 20 + i)).toBe("stored");
      expect(finds).toEqual([]);
      // A redelivery is still recognised from memory, without a read.
      expect(await store.append(together[1]!, 11)).toBe("duplicate");
      expect(finds).toEqual([]);
    } finally {
      await monitored.close();
    }
  });

  it("continues an existing chain from a fresh instance, as after a restart", async () => {
    const { store, reopen } = await freshStore();
    const events = lifecycle();
    const chainId = chainOf(events[0]!);
    await store.append(events[0]!, 1);
    await store.append(events[1]!, 2);
    const restarted = await reopen();
    expect(await restarted.append(events[2]!, 3)).toBe("stored");
    expect(await restarted.append(events[3]!, 4)).toBe("stored");
    const chain = await restarted.chain(chainId);
    expect(chain.map((r) => [r.idx, r.type])).toEqual(CALL_LIFECYCLE.map((t, i) => [i + 1, t]));
    expect(chain[2]?.prev_hash).toBe(chain[1]?.hash);
    expect(await restarted.verify(chainId)).toMatchObject({ ok: true, length: 4 });
  });

  it("recognises a redelivered event in a fresh instance, including the chain's first event", async () => {
    const { store, reopen } = await freshStore();
    const events = lifecycle();
    const chainId = chainOf(events[0]!);
    await store.append(events[0]!, 1);
    await store.append(events[1]!, 2);
    const restarted = await reopen();
    expect(await restarted.append(events[1]!, 2)).toBe("duplicate");
    expect(await restarted.append(events[0]!, 1)).toBe("duplicate");
    // A redelivery and a new event arriving together in one batch.
    const again = await reopen();
    expect(await Promise.all([again.append(events[0]!, 1), again.append(events[1]!, 2), again.append(events[2]!, 3)])).toEqual([
      "duplicate",
      "duplicate",
      "stored",
    ]);
    expect((await again.chain(chainId)).map((r) => r.idx)).toEqual([1, 2, 3]);
    expect(await again.verify(chainId)).toMatchObject({ ok: true, length: 3 });
  });

  it("keeps a run's own events in a chain of their own", async () => {
    const { store } = await freshStore();
    const runId = newRunId();
    const callEvents = lifecycle(newCallId(), runId);
    await store.append(runStarted(runId), 1);
    for (const [i, e] of callEvents.entries()) await store.append(e, i + 2);
    expect((await store.chain(runId)).map((r) => r.type)).toEqual(["started"]);
    expect((await store.run(runId)).map((r) => r.type)).toEqual(["started", ...CALL_LIFECYCLE]);
    expect(await store.verify(runId)).toMatchObject({ ok: true, length: 1 });
  });

  it("records a rejected message once however often it is delivered", async () => {
    const { store } = await freshStore();
    const data = new TextEncoder().encode("this is not JSON");
    const message = { subject: "t.call.call_X.started", streamSeq: 12, data };
    await store.recordRejected({ reason: "invalid_json", detail: "Unexpected token" }, message);
    await store.recordRejected({ reason: "invalid_json", detail: "Unexpected token" }, message);
    await Promise.all([
      store.recordRejected({ reason: "invalid_json", detail: "x" }, message),
      store.recordRejected({ reason: "invalid_json", detail: "x" }, message),
    ]);
    const rejected = await store.rejected();
    expect(rejected).toHaveLength(1);
    expect(rejected[0]).toMatchObject({
      subject: message.subject,
      stream_seq: 12,
      reason: "invalid_json",
      bytes: data.byteLength,
      preview: Buffer.from(data).toString("base64"),
    });
    // A view into a larger buffer is recorded by its own bytes only.
    const big = new Uint8Array(4_000).fill(0x41);
    await store.recordRejected({ reason: "too_large", detail: "big" }, { subject: "t.call.call_Y.started", streamSeq: 13, data: big.subarray(100, 3_100) });
    const [latest] = await store.rejected(1);
    expect(latest).toMatchObject({ stream_seq: 13, bytes: 3_000 });
    expect(Buffer.from(latest!.preview, "base64").byteLength).toBe(2_048);
  });
});

describe("signature verdicts", () => {
  const fresh = () => exportKeyPair(generateKeyPairSync("ed25519").privateKey);
  const keys = { orchestrator: fresh(), policy: fresh(), executor: fresh() };
  const trusted = trustedKeys({ orchestrator: [keys.orchestrator.publicKey], policy: [keys.policy.publicKey], executor: [keys.executor.publicKey] });
  const signer = (role: "orchestrator" | "executor") => eventSigner(role, keys[role].privateKey);
  // The message as it travels: a sealed event's JSON text is its wire form.
  const verdict = (event: ToolgateEvent) => signatureVerdict(trusted, event, new TextEncoder().encode(JSON.stringify(event)));

  it("keeps a refused event under an id of its own, so the legitimate event with that id is still stored, and verify names the forgery", async () => {
    const { store } = await freshStore();
    const callId = newCallId();
    const runId = newRunId();
    const proposed = signer("orchestrator").seal(callEvent(callId, runId, "proposed", 1));
    const forged = callEvent(callId, runId, "completed", 3, { ticket: "FORGED" });
    const genuine = signer("executor").seal(callEvent(callId, runId, "completed", 3));
    await store.append(proposed, 1, verdict(proposed));
    expect(await store.append(forged, 2, verdict(forged))).toBe("stored");
    // A redelivery of the forgery is recognised as such; the real event with the same id is not a duplicate.
    expect(await store.append(forged, 2, verdict(forged))).toBe("duplicate");
    expect(await store.append(genuine, 3, verdict(genuine))).toBe("stored");
    const chain = await store.chain(callId);
    expect(chain.map((r) => [r._id, r.trust?.ok])).toEqual([
      [proposed.id, true],
      [`${forged.id}~refused@2`, false],
      [genuine.id, true],
    ]);
    // Without keys only the hash chain is checked; with them the forgery fails verification at its position.
    expect(await store.verify(callId)).toMatchObject({ ok: true, length: 3 });
    expect(await store.verify(callId, trusted)).toMatchObject({
      ok: false,
      brokenAt: 2,
      untrusted: [{ idx: 2, event_id: `${forged.id}~refused@2`, type: "completed", problem: expect.stringMatching(/^refused: unsigned/) }],
    });
  });

  it("flags an event stored without a verdict, and one whose key is no longer trusted", async () => {
    const { store } = await freshStore();
    const callId = newCallId();
    const runId = newRunId();
    const proposed = signer("orchestrator").seal(callEvent(callId, runId, "proposed", 1));
    await store.append(proposed, 1, verdict(proposed));
    await store.append(callEvent(callId, runId, "started", 2), 2);
    expect(await store.verify(callId, trusted)).toMatchObject({ ok: false, brokenAt: 2, untrusted: [{ idx: 2, problem: expect.stringMatching(/^unsigned/) }] });
    const rotated = trustedKeys({ orchestrator: [fresh().publicKey], policy: [keys.policy.publicKey], executor: [keys.executor.publicKey] });
    expect(await store.verify(callId, rotated)).toMatchObject({ ok: false, brokenAt: 1, problem: expect.stringMatching(/no longer trusted/) });
  });

  it("verifies no signature on arrival: a forgery under a trusted key that comes first keeps the id, the genuine event gets its own, verify names the forgery", async () => {
    const { store } = await freshStore();
    const callId = newCallId();
    const runId = newRunId();
    const genuine = signer("executor").seal(callEvent(callId, runId, "completed", 3));
    // The executor's key id with a signature that key never made.
    const forged = { ...signer("executor").seal(callEvent(callId, runId, "completed", 3, { ticket: "FORGED" })), sig: genuine.sig };
    expect(await store.append(forged, 1, verdict(forged))).toBe("stored");
    expect(await store.append(genuine, 2, verdict(genuine))).toBe("stored");
    // Redeliveries (the same bytes) of either are recognised.
    expect(await store.append(forged, 1, verdict(forged))).toBe("duplicate");
    expect(await store.append(genuine, 2, verdict(genuine))).toBe("duplicate");
    const chain = await store.chain(callId);
    expect(chain.map((r) => r._id)).toEqual([genuine.id, `${genuine.id}~2`]);
    expect(chain[1]!.trust).toMatchObject({ ok: true, key_id: signer("executor").keyId, value: genuine.sig!.value });
    expect(await store.verify(callId)).toMatchObject({ ok: true, length: 2 });
    const verified = await store.verify(callId, trusted);
    expect(verified).toMatchObject({
      ok: false,
      brokenAt: 1,
      untrusted: [{ idx: 1, event_id: genuine.id, type: "completed", problem: expect.stringMatching(/^bad_signature/) }],
    });
    expect(verified.ok === false && verified.untrusted).toHaveLength(1);
  });
});
