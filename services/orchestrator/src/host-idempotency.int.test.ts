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
