import { testDatabase } from "@toolgate/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { MongoRequestIdempotencyStore, type RequestKeyClaimRequest } from "./request-idempotency-store.js";

let database: Awaited<ReturnType<typeof testDatabase>>;
let store: MongoRequestIdempotencyStore;

beforeAll(async () => {
  database = await testDatabase();
  store = new MongoRequestIdempotencyStore(database.db);
  await store.ensureIndexes();
});
afterAll(async () => {
  await database.dispose();
});

const request = (key: string, overrides: Partial<RequestKeyClaimRequest> = {}): RequestKeyClaimRequest => ({
  scope: '["acme","alice"]',
  key,
  route: "POST /v1/tool-calls",
  fingerprint: "sha256:aaa",
  owner: "orchestrator-1",
  leaseMs: 10_000,
  retentionMs: 60_000,
  ...overrides,
});

it("lets exactly one of many concurrent claims of one key own it; the others read the winner's record", async () => {
  const claims = await Promise.all(Array.from({ length: 8 }, (_, i) => store.claim(request("k-concurrent", { owner: `o${i}` }))));
  const winners = claims.filter((c) => c.kind === "claimed");
  expect(winners).toHaveLength(1);
  for (const c of claims) expect(c.record.gen).toBe(winners[0]!.record.gen);
  expect(await store.records.countDocuments({ key: "k-concurrent" })).toBe(1);
});

it("keeps the same key of two scopes apart", async () => {
  const a = await store.claim(request("k-shared"));
  const b = await store.claim(request("k-shared", { scope: '["acme","bob"]' }));
  expect([a.kind, b.kind]).toEqual(["claimed", "claimed"]);
});

it("refuses a second document for one (scope, key) even with another id: the unique index holds", async () => {
  const { record } = await store.claim(request("k-index"));
  await expect(store.records.insertOne({ ...record, _id: "another id" })).rejects.toMatchObject({ code: 11000 });
});

it("reads a submission back with its ids: recorded by an insert, the key's own record is not rewritten", async () => {
  const { record } = await store.claim(request("k-submitted"));
  await store.submitted(record, { runId: "run_1", callIds: ["call_1", "call_2"] });
  // Another process with the same key finds the work (and replays it), though no update touched the record.
  expect(await store.claim(request("k-submitted", { owner: "orchestrator-2" }))).toMatchObject({
    kind: "existing",
    record: { state: "submitted", gen: record.gen, run_id: "run_1", call_ids: ["call_1", "call_2"] },
  });
  expect(await store.records.findOne({ _id: record._id })).toMatchObject({ state: "claimed", gen: record.gen });
  // A second report of the same generation's submission changes nothing.
  await store.submitted(record, { runId: "run_1", callIds: ["call_1", "call_2"] });
  expect((await store.claim(request("k-submitted"))).record).toMatchObject({ state: "submitted", run_id: "run_1" });
});

it("lets one of two concurrent takeovers of a stale claim win, and fences the old owner's writes", async () => {
  const { record } = await store.claim(request("k-stale", { leaseMs: 1 }));
  const [t1, t2] = await Promise.all([store.takeOver(record, "new-1", 10_000), store.takeOver(record, "new-2", 10_000)]);
  const won = [t1, t2].filter((t) => t !== undefined);
  expect(won).toHaveLength(1);
  // The superseded owner's late write matches nothing.
  await store.submitted(record, { runId: "run_old", callIds: ["call_old"] });
  const stored = await store.records.findOne({ _id: record._id });
  expect(stored).toMatchObject({ state: "claimed", gen: won[0]!.gen, owner: won[0]!.owner });
  // Read back, the key is the new owner's claim: the old generation's submission is not its work.
  expect(await store.claim(request("k-stale"))).toMatchObject({ kind: "existing", record: { state: "claimed", gen: won[0]!.gen } });
  await store.complete(won[0]!, { status: 200, body: { $weird: "key" } }, { runId: "run_new", callIds: ["call_new"] });
  expect(await store.records.findOne({ _id: record._id })).toMatchObject({
    state: "done",
    run_id: "run_new",
    call_ids: ["call_new"],
    response: { status: 200, body_json: '{"$weird":"key"}' },
  });
});

it("purges keys whose retention ended, and only those", async () => {
  const old = await store.claim(request("k-old", { retentionMs: -1_000 }));
  await store.submitted(old.record, { runId: "run_old", callIds: ["call_old"] });
  await store.claim(request("k-young"));
  expect(await store.purgeExpired(new Date())).toBeGreaterThanOrEqual(1);
  expect(await store.records.findOne({ key: "k-old" })).toBeNull();
  expect(await database.db.collection("host_idempotency_submissions").findOne({ _id: `${old.record._id}:${old.record.gen}` as never })).toBeNull();
  expect(await store.records.findOne({ key: "k-young" })).not.toBeNull();
  // A purged key starts afresh.
  expect((await store.claim(request("k-old"))).kind).toBe("claimed");
});
