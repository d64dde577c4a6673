import { failure, newCallId, newRunId, success, type ResultEnvelope } from "@toolgate/contracts";
import { testDatabase, uniqueName } from "@toolgate/testkit";
import type { Collection, Db, Document } from "mongodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MongoIdempotencyStore, type ClaimOutcome, type ClaimRequest, type IdempotencyRecord } from "./idempotency-store.js";

const LEASE_MS = 10_000;
const tool = { name: "create_ticket", version: "1", hash: `sha256:${"a".repeat(64)}` };
const hashA = `sha256:${"1".repeat(64)}`;
const hashB = `sha256:${"2".repeat(64)}`;

let database: Awaited<ReturnType<typeof testDatabase>>;
let db: Db;

beforeAll(async () => {
  database = await testDatabase();
  db = database.db;
});
afterAll(async () => {
  await database.dispose();
});

/** `db` whose collections call `hook` just before every single-document write (never before a batched claim insert). */
function onConditionalWrite(target: Db, hook: () => void): Db {
  const writes = new Set(["insertOne", "updateOne", "replaceOne", "findOneAndUpdate", "findOneAndReplace"]);
  const wrap = (collection: Collection<Document>): Collection<Document> =>
    new Proxy(collection, {
      get(c, prop, receiver) {
        const value = Reflect.get(c, prop, receiver) as unknown;
        if (typeof prop !== "string" || !writes.has(prop) || typeof value !== "function") return value;
        return (...args: unknown[]) => {
          hook();
          return (value as (...a: unknown[]) => unknown).apply(c, args);
        };
      },
    });
  return new Proxy(target, {
    get(d, prop, receiver) {
      if (prop !== "collection") return Reflect.get(d, prop, receiver) as unknown;
      return (name: string) => wrap(d.collection(name));
    },
  });
}

/** `db` whose collections call `hook` just before every `findOne`: a competing write lands between a claim's read and its insert. */
function onRead(target: Db, hook: () => void): Db {
  const wrap = (collection: Collection<Document>): Collection<Document> =>
    new Proxy(collection, {
      get(c, prop, receiver) {
        const value = Reflect.get(c, prop, receiver) as unknown;
        if (prop !== "findOne" || typeof value !== "function") return value;
        return (...args: unknown[]) => {
          hook();
          return (value as (...a: unknown[]) => unknown).apply(c, args);
        };
      },
    });
  return new Proxy(target, {
    get(d, prop, receiver) {
      if (prop !== "collection") return Reflect.get(d, prop, receiver) as unknown;
      return (name: string) => wrap(d.collection(name));
    },
  });
}

/** A store on its own collection with a clock the test moves. */
function storeWithClock(start = Date.UTC(2024, 10, 29, 10)) {
  const clock = { now: start };
  const collection = uniqueName("keys_");
  const store = new MongoIdempotencyStore(db, { collection, now: () => clock.now, minRetentionMs: 0 });
  return { store, clock, collection, records: db.collection<IdempotencyRecord>(collection) };
}

function request(key: string, owner: string, argsHash = hashA): ClaimRequest {
  return { key, argsHash, owner, leaseMs: LEASE_MS, callId: newCallId(), runId: newRunId(), tool };
}

describe("MongoIdempotencyStore", () => {
  it("claims a new key, reports busy while in flight, replays once complete", async () => {
    const { store, clock } = storeWithClock();
    const key = uniqueName("key_");
    const req = request(key, "executor-a");
    expect(await store.claim(req)).toEqual({ kind: "claimed", attempt: 1, firstClaimAt: clock.now });

    clock.now += 4_000;
    expect(await store.claim({ ...req, owner: "executor-b" })).toEqual({ kind: "busy", retryAfterMs: 6_000, owner: "executor-a" });
    // The owner itself asking again (a redelivery to the same executor) is busy too, not a second claim.
    expect((await store.claim(req)).kind).toBe("busy");

    const result: ResultEnvelope = success(req.callId, { ticket_id: "T-1", tags: [] });
    expect(await store.complete(key, "executor-a", 1, result)).toBe(true);
    const replay = await store.claim({ ...req, owner: "executor-b" });
    expect(replay).toEqual({ kind: "replay", result, attempt: 1 });
    // Completing twice is fenced too: the record is no longer in flight.
    expect(await store.complete(key, "executor-a", 1, failure(req.callId, "EXECUTION_ERROR", "late"))).toBe(false);
    expect(await store.claim(req)).toEqual({ kind: "replay", result, attempt: 1 });
  });

  it("stores and replays a result whose data has keys Mongo treats specially", async () => {
    const { store } = storeWithClock();
    const key = uniqueName("key_");
    const req = request(key, "executor-a");
    await store.claim(req);
    // Tool output is untrusted data: JSON Schema documents, dotted names and empty keys are ordinary JSON.
    const result: ResultEnvelope = success(req.callId, {
      $schema: "https://json-schema.org/draft/2020-12/schema",
      $ref: "#/x",
      "a.b": 1,
      "": [null, { $id: "x" }],
    });
    expect(await store.complete(key, "executor-a", 1, result)).toBe(true);
    expect(await store.claim(req)).toEqual({ kind: "replay", result, attempt: 1 });
  });

  it("answers conflict for the same key with other arguments, in flight or done", async () => {
    const { store } = storeWithClock();
    const key = uniqueName("key_");
    const req = request(key, "executor-a");
    await store.claim(req);
    expect(await store.claim({ ...request(key, "executor-b", hashB) })).toEqual({ kind: "conflict", storedArgsHash: hashA });
    await store.complete(key, "executor-a", 1, success(req.callId, null));
    expect(await store.claim({ ...request(key, "executor-b", hashB) })).toEqual({ kind: "conflict", storedArgsHash: hashA });
  });

  it("claims a key already done in one write: every later claim replays it, and it never lands on a used key", async () => {
    const { store, collection } = storeWithClock();
    const steps = db.collection(`${collection}_steps`);
    const key = uniqueName("key_");
    const req = request(key, "executor-a");
    const result: ResultEnvelope = success(req.callId, { "a.b": 1, $ref: "#/x" });
    expect(await store.claimDone(req, result)).toBe(true);
    expect(await steps.countDocuments({})).toBe(0);
    expect(await store.claim({ ...req, owner: "executor-b" })).toEqual({ kind: "replay", result, attempt: 1 });
    expect(await store.claim({ ...request(key, "executor-b", hashB) })).toEqual({ kind: "conflict", storedArgsHash: hashA });
    // A second answer for the same key (a redelivery that ran too) is not stored: the first stands.
    expect(await store.claimDone({ ...req, owner: "executor-b" }, success(req.callId, "second"))).toBe(false);
    expect(await store.claim(req)).toEqual({ kind: "replay", result, attempt: 1 });

    // Nor does it take a key another attempt holds, or has completed.
    const held = uniqueName("key_");
    expect(await store.claim(request(held, "executor-a"))).toMatchObject({ kind: "claimed" });
    expect(await store.claimDone(request(held, "executor-b"), success(req.callId, "late"))).toBe(false);
    expect(await store.claim(request(held, "executor-b"))).toMatchObject({ kind: "busy", owner: "executor-a" });
  });

  it("lets exactly one of 8 concurrent claims of one key win", async () => {
    const { store } = storeWithClock();
    const key = uniqueName("key_");
    const outcomes = await Promise.all(Array.from({ length: 8 }, (_, i) => store.claim(request(key, `executor-${i}`))));
    const claimed = outcomes.filter((o) => o.kind === "claimed");
    expect(claimed).toHaveLength(1);
    expect(outcomes.filter((o) => o.kind === "busy")).toHaveLength(7);
    const winner = outcomes.findIndex((o) => o.kind === "claimed");
    for (const o of outcomes) if (o.kind === "busy") expect(o.owner).toBe(`executor-${winner}`);
  });

  it("lets exactly one of 8 concurrent claims win across separate store instances", async () => {
    const { collection, clock } = storeWithClock();
    const stores = Array.from({ length: 8 }, () => new MongoIdempotencyStore(db, { collection, now: () => clock.now }));
    const key = uniqueName("key_");
    const outcomes = await Promise.all(stores.map((s, i) => s.claim(request(key, `executor-${i}`))));
    expect(outcomes.filter((o) => o.kind === "claimed")).toHaveLength(1);
    expect(outcomes.filter((o) => o.kind === "busy")).toHaveLength(7);
  });

  it("takes over an expired lease with attempt 2 and fences the previous owner", async () => {
    const { store, clock } = storeWithClock();
    const key = uniqueName("key_");
    const req = request(key, "executor-a");
    const claimedAt = clock.now;
    expect(await store.claim(req)).toEqual({ kind: "claimed", attempt: 1, firstClaimAt: claimedAt });

    clock.now += LEASE_MS - 1;
    expect((await store.claim({ ...req, owner: "executor-b" })).kind).toBe("busy");
    clock.now += 1;
    const takeover = await store.claim({ ...req, owner: "executor-b" });
    expect(takeover).toEqual({ kind: "taken_over", attempt: 2, previousOwner: "executor-a", abandoned: 1, firstClaimAt: claimedAt });

    // The paused "zombie" wakes up: it can neither extend its lease nor publish a result.
    expect(await store.renew(key, "executor-a", 1, LEASE_MS)).toBe(false);
    expect(await store.complete(key, "executor-a", 1, success(req.callId, "zombie"))).toBe(false);
    // Ownership is the pair (owner, attempt): the old attempt number under the new owner's name is fenced too.
    expect(await store.complete(key, "executor-b", 1, success(req.callId, "stale attempt"))).toBe(false);
    // While the new owner holds the lease, everyone else is busy.
    expect(await store.claim({ ...req, owner: "executor-a" })).toMatchObject({ kind: "busy", owner: "executor-b" });

    expect(await store.renew(key, "executor-b", 2, LEASE_MS)).toBe(true);
    const result = success(req.callId, "the one effect");
    expect(await store.complete(key, "executor-b", 2, result)).toBe(true);
    expect(await store.claim({ ...req, owner: "executor-c" })).toEqual({ kind: "replay", result, attempt: 2 });
  });

  it("lets exactly one of 8 concurrent claims take over an expired lease", async () => {
    const { store, clock } = storeWithClock();
    const key = uniqueName("key_");
    await store.claim(request(key, "executor-a"));
    clock.now += LEASE_MS + 1;
    const outcomes = await Promise.all(Array.from({ length: 8 }, (_, i) => store.claim(request(key, `executor-${i + 1}`))));
    const takeovers = outcomes.filter((o): o is Extract<ClaimOutcome, { kind: "taken_over" }> => o.kind === "taken_over");
    expect(takeovers).toHaveLength(1);
    expect(takeovers[0]).toMatchObject({ attempt: 2, previousOwner: "executor-a" });
    expect(outcomes.filter((o) => o.kind === "busy")).toHaveLength(7);
  });

  it("never lets a zombie's completion and a takeover both succeed", async () => {
    const { store, clock, collection } = storeWithClock();
    const keys = Array.from({ length: 16 }, () => uniqueName("key_"));
    for (const key of keys) await store.claim(request(key, "zombie"));
    clock.now += LEASE_MS + 1;
    const races = await Promise.all(
      keys.map(async (key) => {
        // The paused owner wakes and completes exactly when the rescuer sends its compare-and-set write.
        let late: Promise<boolean> | undefined;
        const zombieWakes = (): void => {
          late ??= store.complete(key, "zombie", 1, success(newCallId(), "late"));
        };
        const rescuer = new MongoIdempotencyStore(onConditionalWrite(db, zombieWakes), { collection, now: () => clock.now });
        const claim = await rescuer.claim(request(key, "rescuer"));
        zombieWakes();
        return { completed: await late!, claim: claim.kind };
      }),
    );
    for (const race of races) {
      // Exactly one wins: the completion (the rescuer replays it) or the takeover (the zombie is fenced).
      expect(race).toEqual(race.completed ? { completed: true, claim: "replay" } : { completed: false, claim: "taken_over" });
    }
  });

  it("renew keeps a lease alive past its first expiry", async () => {
    const { store, clock } = storeWithClock();
    const key = uniqueName("key_");
    await store.claim(request(key, "executor-a"));
    clock.now += LEASE_MS - 1_000;
    expect(await store.renew(key, "executor-a", 1, LEASE_MS)).toBe(true);
    clock.now += 5_000;
    expect(await store.claim(request(key, "executor-b"))).toEqual({ kind: "busy", retryAfterMs: 5_000, owner: "executor-a" });
    expect(await store.renew(key, "executor-b", 1, LEASE_MS)).toBe(false);
    expect(await store.renew(uniqueName("missing_"), "executor-a", 1, LEASE_MS)).toBe(false);
  });

  it("fences a zombie that wakes after its key was completed by another, purged and claimed again", async () => {
    const { store, clock, collection } = storeWithClock();
    const key = uniqueName("key_");
    const req = request(key, "zombie");
    await store.claim(req);
    clock.now += LEASE_MS + 1;
    const other = new MongoIdempotencyStore(db, { collection, now: () => clock.now, minRetentionMs: 0 });
    expect(await other.claim({ ...req, owner: "rescuer" })).toMatchObject({ kind: "taken_over", attempt: 2 });
    expect(await other.complete(key, "rescuer", 2, success(req.callId, "done"))).toBe(true);
    clock.now += 60_000;
    expect(await other.purgeCompleted(new Date(clock.now))).toBe(1);
    expect(await other.claim({ ...req, owner: "next" })).toEqual({ kind: "claimed", attempt: 1, firstClaimAt: clock.now });
    // The zombie's own store instance still remembers owning attempt 1 of the old generation.
    expect(await store.complete(key, "zombie", 1, success(req.callId, "zombie"))).toBe(false);
    expect(await store.renew(key, "zombie", 1, LEASE_MS)).toBe(false);
    expect(await other.complete(key, "next", 1, success(req.callId, "next"))).toBe(true);
    expect(await store.claim(req)).toMatchObject({ kind: "replay", result: { data: "next" } });
  });

  it("keeps completed keys for the minimum retention, so completing within it needs no purge check", async () => {
    const clock = { now: Date.UTC(2024, 10, 29, 10) };
    const store = new MongoIdempotencyStore(db, { collection: uniqueName("keys_"), now: () => clock.now, minRetentionMs: 3_600_000 });
    const req = request(uniqueName("key_"), "executor-a");
    await store.claim(req);
    expect(await store.complete(req.key, "executor-a", 1, success(req.callId, "x"))).toBe(true);
    await expect(store.purgeCompleted(new Date(clock.now))).rejects.toThrow(RangeError);
    clock.now += 3_600_001;
    expect(await store.purgeCompleted(new Date(clock.now - 3_600_000))).toBe(1);
  });

  it("purgeCompleted deletes only done records completed before the cutoff", async () => {
    const { store, clock, records } = storeWithClock();
    const t0 = clock.now;
    const done = async (key: string): Promise<void> => {
      const req = request(key, "executor-a");
      await store.claim(req);
      expect(await store.complete(key, "executor-a", 1, success(req.callId, key))).toBe(true);
    };
    await done("old-1");
    await done("old-2");
    clock.now = t0 + 60_000;
    await done("at-cutoff");
    clock.now = t0 + 120_000;
    await done("recent");
    await store.claim(request("in-flight-old", "executor-a"));
    // An in-flight record created long ago (a crashed executor) is never purged: it may still be taken over.
    clock.now = t0 + 10 * 60_000;

    expect(await store.purgeCompleted(new Date(t0 + 60_000))).toBe(2);
    const left = (await records.find({}, { projection: { _id: 1 } }).toArray()).map((r) => r._id).sort();
    expect(left).toEqual(["at-cutoff", "in-flight-old", "recent"]);
    expect(await store.purgeCompleted(new Date(t0 + 60_000))).toBe(0);
    // A purged key is free again.
    expect(await store.claim(request("old-1", "executor-b"))).toEqual({ kind: "claimed", attempt: 1, firstClaimAt: clock.now });
  });

  it("purgeCompleted deletes keys claimed already done before the cutoff too", async () => {
    const { store, clock, records } = storeWithClock();
    const t0 = clock.now;
    const req = request("read-old", "executor-a");
    expect(await store.claimDone(req, success(req.callId, 1))).toBe(true);
    clock.now = t0 + 120_000;
    expect(await store.claimDone(request("read-recent", "executor-a"), success(req.callId, 2))).toBe(true);
    expect(await store.purgeCompleted(new Date(t0 + 60_000))).toBe(1);
    expect((await records.find({}, { projection: { _id: 1 } }).toArray()).map((r) => r._id)).toEqual(["read-recent"]);
    expect(await store.claim(request("read-old", "executor-b"))).toEqual({ kind: "claimed", attempt: 1, firstClaimAt: clock.now });
  });
  it("schedules a retry: nobody starts the next attempt before notBefore, then exactly one of 8 does", async () => {
    const { store, clock, collection } = storeWithClock();
    const key = uniqueName("key_");
    const req = request(key, "executor-a");
    const t0 = clock.now;
    await store.claim(req);
    const failed = failure(req.callId, "UPSTREAM_UNAVAILABLE", "try later");
    expect(await store.scheduleRetry(key, "executor-a", 1, failed, new Date(t0 + 2_000))).toBe(true);
    // The failed attempt can neither complete nor retry again.
    expect(await store.complete(key, "executor-a", 1, success(req.callId, "late"))).toBe(false);
    expect(await store.scheduleRetry(key, "executor-a", 1, failed, new Date(t0 + 4_000))).toBe(false);

    clock.now = t0 + 1_500;
    expect(await store.claim({ ...req, owner: "executor-b" })).toEqual({ kind: "busy", retryAfterMs: 500, owner: "executor-a" });

    clock.now = t0 + 2_000;
    const stores = Array.from({ length: 8 }, () => new MongoIdempotencyStore(db, { collection, now: () => clock.now, minRetentionMs: 0 }));
    const outcomes = await Promise.all(stores.map((s, i) => s.claim(request(key, `executor-${i}`))));
    const claimed = outcomes.filter((o) => o.kind === "claimed");
    // The winner learns how attempt 1 ended, as its retry_scheduled said: the trace it publishes again first.
    expect(claimed).toEqual([
      { kind: "claimed", attempt: 2, firstClaimAt: t0, retried: [{ attempt: 1, code: "UPSTREAM_UNAVAILABLE", at: t0, notBefore: t0 + 2_000 }] },
    ]);
    expect(outcomes.filter((o) => o.kind === "busy")).toHaveLength(7);
    const winner = outcomes.findIndex((o) => o.kind === "claimed");

    // The winner's lease can be renewed; the attempt completes once and is replayed with its number.
    expect(await stores[winner]!.renew(key, `executor-${winner}`, 2, LEASE_MS)).toBe(true);
    expect(await stores[(winner + 1) % 8]!.complete(key, `executor-${(winner + 1) % 8}`, 2, success(req.callId, "not mine"))).toBe(false);
    const result = success(req.callId, "second attempt");
    expect(await stores[winner]!.complete(key, `executor-${winner}`, 2, result)).toBe(true);
    expect(await store.claim(req)).toEqual({ kind: "replay", result, attempt: 2 });
  });

  it("takes over a retried attempt whose owner died, counting the abandoned attempts", async () => {
    const { store, clock, collection } = storeWithClock();
    const key = uniqueName("key_");
    const req = request(key, "executor-a");
    const t0 = clock.now;
    await store.claim(req);
    await store.scheduleRetry(key, "executor-a", 1, failure(req.callId, "RATE_LIMITED", "slow down"), new Date(t0));
    const b = new MongoIdempotencyStore(db, { collection, now: () => clock.now, minRetentionMs: 0 });
    expect(await b.claim({ ...req, owner: "executor-b" })).toMatchObject({ kind: "claimed", attempt: 2 });

    clock.now += LEASE_MS + 1;
    const c = new MongoIdempotencyStore(db, { collection, now: () => clock.now, minRetentionMs: 0 });
    expect(await c.claim({ ...req, owner: "executor-c" })).toEqual({
      kind: "taken_over",
      attempt: 3,
      previousOwner: "executor-b",
      abandoned: 1,
      firstClaimAt: t0,
      retried: [{ attempt: 1, code: "RATE_LIMITED", at: t0, notBefore: t0 }],
    });
    // The paused owner of attempt 2 wakes: fenced for completion, retry and renewal alike.
    expect(await b.complete(key, "executor-b", 2, success(req.callId, "zombie"))).toBe(false);
    expect(await b.scheduleRetry(key, "executor-b", 2, failure(req.callId, "RATE_LIMITED", "x"), new Date(clock.now))).toBe(false);
    expect(await b.renew(key, "executor-b", 2, LEASE_MS)).toBe(false);

    clock.now += LEASE_MS + 1;
    expect(await store.claim({ ...req, owner: "executor-d" })).toMatchObject({ kind: "taken_over", attempt: 4, previousOwner: "executor-c", abandoned: 2 });
  });

  it("never lets a retry and a takeover of the same attempt both succeed", async () => {
    const { store, clock, collection } = storeWithClock();
    const keys = Array.from({ length: 16 }, () => uniqueName("key_"));
    for (const key of keys) await store.claim(request(key, "slow"));
    clock.now += LEASE_MS + 1;
    const races = await Promise.all(
      keys.map(async (key) => {
        let late: Promise<boolean> | undefined;
        const wakes = (): void => {
          late ??= store.scheduleRetry(key, "slow", 1, failure(newCallId(), "UPSTREAM_UNAVAILABLE", "x"), new Date(clock.now));
        };
        const rescuer = new MongoIdempotencyStore(onRead(db, wakes), { collection, now: () => clock.now });
        const claim = await rescuer.claim(request(key, "rescuer"));
        return { retried: await late!, claim: claim.kind };
      }),
    );
    // Either the retry landed first (the rescuer starts attempt 2 as a clean retry) or the takeover did.
    for (const race of races) expect(race).toEqual(race.retried ? { retried: true, claim: "claimed" } : { retried: false, claim: "taken_over" });
  });
});
