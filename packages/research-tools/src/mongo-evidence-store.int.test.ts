import { testDatabase } from "@toolgate/testkit";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { evidenceId, MongoEvidenceStore, type NewEvidence } from "./index.js";

type TestDb = Awaited<ReturnType<typeof testDatabase>>;

const evidence = (idempotencyKey: string, claim = "Sessions persist conversation history."): NewEvidence => ({
  taskId: "task_c04",
  claim,
  sourceUrl: "https://example.test/docs/openai-agents-sdk/sessions",
  quote: "Sessions provide a persistent memory layer",
  idempotencyKey,
});

describe("MongoEvidenceStore", () => {
  let database: TestDb;
  let store: MongoEvidenceStore;

  beforeEach(async () => {
    database = await testDatabase();
    store = new MongoEvidenceStore(database.db, { collection: "evidence_it" });
    await store.ensureIndexes();
  });

  afterEach(async () => {
    await database.dispose();
  });

  const count = (filter: Record<string, string> = {}) => database.db.collection("evidence_it").countDocuments(filter);

  it("creates a unique (task_id, idempotency_key) index, idempotently", async () => {
    await store.ensureIndexes();
    const indexes = await database.db.collection("evidence_it").indexes();
    const dedup = indexes.find((i) => i.name === "task_id_1_idempotency_key_1");
    expect(dedup?.key).toEqual({ task_id: 1, idempotency_key: 1 });
    expect(dedup?.unique).toBe(true);
  });

  it("creates a record on the first save with a deterministic id", async () => {
    const result = await store.save(evidence("key-1"));
    expect(result.created).toBe(true);
    expect(result.record).toMatchObject({ ...evidence("key-1"), evidenceId: evidenceId("task_c04", "key-1") });
    expect(await count()).toBe(1);
  });

  it("replays the same key: created false, same id, first content kept, still one document", async () => {
    const first = await store.save(evidence("key-1"));
    const replay = await store.save(evidence("key-1", "A different claim on a replay."));
    expect(replay.created).toBe(false);
    expect(replay.record.evidenceId).toBe(first.record.evidenceId);
    expect(replay.record.claim).toBe(first.record.claim);
    expect(replay.record.createdAt.getTime()).toBe(first.record.createdAt.getTime());
    expect(await count()).toBe(1);
  });

  it("stores a second record for a different key", async () => {
    const first = await store.save(evidence("key-1"));
    const second = await store.save(evidence("key-2"));
    expect(second.created).toBe(true);
    expect(second.record.evidenceId).not.toBe(first.record.evidenceId);
    expect(await count()).toBe(2);
    const listed = await store.listByTask("task_c04");
    expect(listed.map((r) => r.idempotencyKey).sort()).toEqual(["key-1", "key-2"]);
    expect(await store.listByTask("other_task")).toEqual([]);
  });

  it("keeps exactly one document when eight saves with one key race", async () => {
    const results = await Promise.all(Array.from({ length: 8 }, () => store.save(evidence("key-race"))));
    expect(results.filter((r) => r.created)).toHaveLength(1);
    expect(new Set(results.map((r) => r.record.evidenceId))).toEqual(new Set([evidenceId("task_c04", "key-race")]));
    expect(await count({ idempotency_key: "key-race" })).toBe(1);
  });

  it("scopes keys to the task: the same key under another task is another record", async () => {
    await store.save(evidence("shared-key"));
    const other = await store.save({ ...evidence("shared-key"), taskId: "task_other" });
    expect(other.created).toBe(true);
    expect(await count()).toBe(2);
  });

  it("omits the quote when none is given", async () => {
    const { quote: _quote, ...withoutQuote } = evidence("key-noquote");
    const result = await store.save(withoutQuote);
    expect(result.record).not.toHaveProperty("quote");
    const [listed] = await store.listByTask("task_c04");
    expect(listed).not.toHaveProperty("quote");
  });
});
