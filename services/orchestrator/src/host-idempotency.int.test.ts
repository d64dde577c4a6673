import { MongoRequestIdempotencyStore } from "@toolgate/storage";
import { createLogger } from "@toolgate/telemetry";
import { testDatabase, waitFor } from "@toolgate/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { HostIdempotency, MAX_HOLD_LEASES } from "./host-idempotency.js";

// Claims held while their work runs, against the real store.
const LEASE_MS = 300;
let database: Awaited<ReturnType<typeof testDatabase>>;
let store: MongoRequestIdempotencyStore;
let idempotency: HostIdempotency;

beforeAll(async () => {
  database = await testDatabase("tg_hold_");
  store = new MongoRequestIdempotencyStore(database.db);
  await store.ensureIndexes();
  idempotency = new HostIdempotency({
    store,
    owner: "test",
    leaseMs: LEASE_MS,
    retentionMs: 60_000,
    purgeMs: 60_000,
    joinWaitMs: 300,
    logger: createLogger({ service: "test", level: "silent" }),
  });
});
afterAll(async () => {
  idempotency.close();
  await database.dispose();
});

const request = (key: string) => ({ scope: "alice", key, route: "POST /v1/tool-calls", fingerprint: "f" });
const leaseOf = async (key: string) => (await store.records.findOne({ scope: "alice", key }))!.lease_until.getTime();

it("keeps a slow request's claim while its work runs, so that a retry is told in flight rather than taking it over", async () => {
  const first = await idempotency.begin(request("slow"));
  expect(first.kind).toBe("execute");
  if (first.kind !== "execute") return;
  let finish!: () => void;
  const work = new Promise<void>((resolve) => (finish = resolve));
  idempotency.hold(first.record, work);

  // The lease is renewed past where the claim put it, and a retry after that original lease finds it in flight.
  const claimedUntil = first.record.lease_until.getTime();
  await waitFor(async () => Date.now() > claimedUntil && (await leaseOf("slow")) > Date.now(), {
    timeoutMs: 5_000,
    description: "the lease renewed past the claim's own",
  });
  expect((await idempotency.begin(request("slow"))).kind).toBe("in_flight");

  // Once the work has ended nothing renews it: its lease runs out and a retry takes the key over.
  finish();
  await work;
  await waitFor(async () => Date.now() > (await leaseOf("slow")), { timeoutMs: 5_000, description: "the lease to run out" });
  expect(await idempotency.begin(request("slow"))).toMatchObject({ kind: "execute", takenOver: true });
});

it("lets a claim whose work never ends be taken over after a bounded number of leases", async () => {
  const first = await idempotency.begin(request("hung"));
  if (first.kind !== "execute") throw new Error("not claimed");
  idempotency.hold(first.record, new Promise(() => undefined));
  const bound = first.record.created_at.getTime() + (MAX_HOLD_LEASES + 1) * LEASE_MS;
  const decision = await waitFor(
    async () => {
      const retry = await idempotency.begin(request("hung"));
      return retry.kind === "execute" ? retry : undefined;
    },
    { timeoutMs: 10_000, intervalMs: 100, description: "a retry taking the hung claim over" },
  );
  expect(decision).toMatchObject({ takenOver: true });
  expect(Date.now()).toBeGreaterThan(first.record.created_at.getTime() + MAX_HOLD_LEASES * LEASE_MS);
  expect(Date.now()).toBeLessThan(bound + 2_000);
});

it("lets a retry of a submission this process is making wait for it and replay its ids", async () => {
  const first = await idempotency.begin(request("joined"));
  if (first.kind !== "execute") throw new Error("not claimed");
  let submit!: (ids: { runId: string; callIds: string[] }) => void;
  const work = new Promise<{ runId: string; callIds: string[] }>((resolve) => (submit = resolve));
  idempotency.submitting(first.record, work);
  const retry = idempotency.begin(request("joined"));
  submit({ runId: "run_1", callIds: ["call_1", "call_2"] });
  expect(await retry).toMatchObject({ kind: "replay", record: { state: "submitted", run_id: "run_1", call_ids: ["call_1", "call_2"] } });
  // The store still says claimed: the answer came from the submission itself.
  expect((await store.records.findOne({ scope: "alice", key: "joined" }))!.state).toBe("claimed");
});

it("tells a retry in flight while the submission outlasts the wait, and sends one after a failed submission to the store", async () => {
  const first = await idempotency.begin(request("failing"));
  if (first.kind !== "execute") throw new Error("not claimed");
  let fail!: (error: Error) => void;
  const work = new Promise<{ runId: string; callIds: string[] }>((_, reject) => (fail = reject));
  work.catch(() => undefined);
  idempotency.submitting(first.record, work);
  expect(await idempotency.begin(request("failing"))).toEqual({ kind: "in_flight", retryAfterS: 1 });
  // Another request with the same key is not this submission: it is told what the store says (422).
  expect((await idempotency.begin({ ...request("failing"), fingerprint: "other" })).kind).toBe("mismatch");
  fail(new Error("NATS unreachable"));
  await store.fail(first.record);
  expect(await idempotency.begin(request("failing"))).toMatchObject({ kind: "execute", takenOver: true });
});

it("sends a retry that joined a submission which then failed to the store only once its release has landed", async () => {
  // The store as the orchestrator uses it, with the order of its commands written down.
  const order: string[] = [];
  const recorded = new Proxy(store, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target) as unknown;
      if (typeof value !== "function") return value;
      const method = value as (...a: unknown[]) => Promise<unknown>;
      return async (...args: unknown[]): Promise<unknown> => {
        order.push(`${String(prop)} begins`);
        try {
          return await method.apply(target, args);
        } finally {
          order.push(`${String(prop)} ends`);
        }
      };
    },
  });
  const keys = new HostIdempotency({
    store: recorded,
    owner: "test",
    leaseMs: 60_000,
    retentionMs: 60_000,
    purgeMs: 60_000,
    joinWaitMs: 30_000,
    logger: createLogger({ service: "test", level: "silent" }),
  });
  try {
    const first = await keys.begin(request("released"));
    if (first.kind !== "execute") throw new Error("not claimed");
    let fail!: (error: Error) => void;
    const work = new Promise<{ runId: string; callIds: string[] }>((_, reject) => (fail = reject));
    keys.submitting(first.record, work);
    // As the API does: a submission that fails releases its key.
    work.catch(() => keys.fail(first.record));
    order.length = 0;
    const retry = keys.begin(request("released"));
    fail(new Error("NATS unreachable"));
    // Read before the release landed, the key would still be claimed for a minute: the retry would be told 409.
    expect(await retry).toMatchObject({ kind: "execute", takenOver: true });
    expect(order.slice(0, 3)).toEqual(["fail begins", "fail ends", "claim begins"]);
  } finally {
    keys.close();
  }
});

it("answers a later retry of a submission this process made from memory, without a round trip to the store", async () => {
  const first = await idempotency.begin(request("remembered"));
  if (first.kind !== "execute") throw new Error("not claimed");
  const work = Promise.resolve({ runId: "run_9", callIds: ["call_9"] });
  idempotency.submitting(first.record, work);
  await work;
  // The store's record is taken away: an answer that still carries the ids can only come from memory.
  await store.records.deleteOne({ _id: first.record._id });
  expect(await idempotency.begin(request("remembered"))).toMatchObject({
    kind: "replay",
    record: { state: "submitted", run_id: "run_9", call_ids: ["call_9"] },
  });
  // Another request with the same key is not that submission: it goes to the store.
  expect((await idempotency.begin({ ...request("remembered"), fingerprint: "other" })).kind).toBe("execute");
});

it("releases a claim won after the request's deadline, so that the retry takes the key over at once", async () => {
  // The store answers the claim after the deadline (a database catching up after an outage).
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const slowStore = Object.assign(Object.create(store) as MongoRequestIdempotencyStore, {
    claim: async (...args: Parameters<MongoRequestIdempotencyStore["claim"]>) => {
      await gate;
      return store.claim(...args);
    },
  });
  const slow = new HostIdempotency({
    store: slowStore,
    owner: "slow",
    // A lease far longer than the test: only a release lets the retry in.
    leaseMs: 60_000,
    retentionMs: 60_000,
    purgeMs: 60_000,
    logger: createLogger({ service: "test", level: "silent" }),
  });
  try {
    await expect(slow.beginWithin(request("late"), 100)).rejects.toMatchObject({ name: "DependencyUnavailableError", dependency: "deadline" });
    release();
    // The late claim lands and is released: the retry takes it over instead of being told it is in flight.
    await waitFor(async () => (await store.records.findOne({ scope: "alice", key: "late" }))?.state === "failed", {
      timeoutMs: 5_000,
      description: "the late claim released",
    });
    expect(await idempotency.begin(request("late"))).toMatchObject({ kind: "execute", takenOver: true });
  } finally {
    slow.close();
  }
});
