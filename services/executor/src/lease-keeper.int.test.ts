import { newCallId, newRunId } from "@toolgate/contracts";
import { MongoIdempotencyStore, type ClaimRequest } from "@toolgate/storage";
import { createLogger } from "@toolgate/telemetry";
import { testDatabase, uniqueName, waitFor } from "@toolgate/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { LeaseKeeper } from "./lease-keeper.js";

// Against the real store: a short lease outlives a slow attempt while its executor lives, and runs out soon
// after it stops.
const LEASE_MS = 1_000;
const logger = createLogger({ service: "test", level: "silent" });
let database: Awaited<ReturnType<typeof testDatabase>>;
let store: MongoIdempotencyStore;

beforeAll(async () => {
  database = await testDatabase("tg_leases_");
  store = new MongoIdempotencyStore(database.db);
});
afterAll(async () => {
  await database.dispose();
});

const request = (owner: string, key: string): ClaimRequest => ({
  key,
  argsHash: `sha256:${"1".repeat(64)}`,
  owner,
  leaseMs: LEASE_MS,
  callId: newCallId(),
  runId: newRunId(),
  tool: { name: "create_ticket", version: "1", hash: `sha256:${"a".repeat(64)}` },
});

it("keeps a running attempt's key past many short leases, and lets it go one lease after it stops", async () => {
  const key = uniqueName("k");
  const keeper = new LeaseKeeper({ store, owner: "executor-a", leaseMs: LEASE_MS, logger });
  expect((await store.claim(request("executor-a", key))).kind).toBe("claimed");
  const release = keeper.hold(key, 1, 60_000);
  const heldFrom = Date.now();
  // Another executor asks again and again for three leases' time: the key is never free.
  while (Date.now() - heldFrom < 3 * LEASE_MS) {
    const claim = await store.claim(request("executor-b", key));
    expect(claim.kind).toBe("busy");
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  // The attempt's executor stops renewing (it died): within about one lease the key can be taken over.
  release();
  const stopped = Date.now();
  const takeover = await waitFor(
    async () => {
      const claim = await store.claim(request("executor-b", key));
      return claim.kind === "taken_over" ? claim : undefined;
    },
    { description: "the key to be taken over", timeoutMs: 10_000, intervalMs: 50 },
  );
  expect(takeover.previousOwner).toBe("executor-a");
  expect(Date.now() - stopped).toBeLessThan(LEASE_MS + 1_000);
  keeper.close();
});

it("never renews past the attempt's deadline", async () => {
  const key = uniqueName("k");
  const keeper = new LeaseKeeper({ store, owner: "executor-a", leaseMs: LEASE_MS, logger });
  expect((await store.claim(request("executor-a", key))).kind).toBe("claimed");
  const heldFrom = Date.now();
  keeper.hold(key, 1, 1_500);
  const takeover = await waitFor(async () => ((await store.claim(request("executor-b", key))).kind === "taken_over" ? true : undefined), {
    description: "the key to be taken over despite the holder",
    timeoutMs: 10_000,
    intervalMs: 50,
  });
  expect(takeover).toBe(true);
  expect(Date.now() - heldFrom).toBeLessThan(1_500 + LEASE_MS + 1_000);
  keeper.close();
});
