import { testDatabase, uniqueName } from "@toolgate/testkit";
import type { Collection, Db } from "mongodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InsertBatcher } from "./insert-batcher.js";

interface Doc {
  _id: string;
  n: number;
  [key: string]: unknown;
}

let database: Awaited<ReturnType<typeof testDatabase>>;
let db: Db;

beforeAll(async () => {
  database = await testDatabase();
  db = database.db;
});
afterAll(async () => {
  await database.dispose();
});

/** The collection, with the document ids of every insert command recorded, and which method sent it. */
function observed(collection: Collection<Doc>): { collection: Collection<Doc>; batches: string[][]; methods: string[] } {
  const batches: string[][] = [];
  const methods: string[] = [];
  const proxy = new Proxy(collection, {
    get(target, prop, receiver) {
      if (prop === "insertMany") {
        return (docs: Doc[], options: unknown) => {
          batches.push(docs.map((d) => d._id));
          methods.push("insertMany");
          return target.insertMany(docs, options as never);
        };
      }
      if (prop === "insertOne") {
        return (doc: Doc, options: unknown) => {
          batches.push([doc._id]);
          methods.push("insertOne");
          return target.insertOne(doc, options as never);
        };
      }
      return Reflect.get(target, prop, receiver) as unknown;
    },
  });
  return { collection: proxy, batches, methods };
}

/** Lets the event loop run one turn: inserts made before it are flushed by then. */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

describe("InsertBatcher", () => {
  it("sends what one turn of the event loop inserts as one command", async () => {
    const raw = db.collection<Doc>(uniqueName("batch_"));
    const { collection, batches } = observed(raw);
    const batcher = new InsertBatcher(collection, { maxBatch: 100, maxInFlight: 1 });
    // Inserted from different promise chains of one turn: a claim and, a few awaits later, a record.
    const claim = batcher.insert({ _id: "claim", n: 0 });
    const record = Promise.resolve()
      .then(() => undefined)
      .then(() => batcher.insert({ _id: "record", n: 1 }));
    expect(await Promise.all([claim, record])).toEqual(["inserted", "inserted"]);
    expect(batches).toEqual([["claim", "record"]]);
  });

  it("resolves each caller of one mixed batch: inserted, duplicate of a stored doc, duplicate within the batch", async () => {
    const raw = db.collection<Doc>(uniqueName("batch_"));
    await raw.insertMany([
      { _id: "old-1", n: 0 },
      { _id: "old-2", n: 0 },
    ]);
    const { collection, batches } = observed(raw);
    const batcher = new InsertBatcher(collection, { maxBatch: 100, maxInFlight: 1 });
    // The first insert is in flight alone; everything after it queues into the next batch.
    const ids = ["lead", "new-1", "old-1", "new-2", "new-1", "old-2", "new-3"];
    const lead = batcher.insert({ _id: "lead", n: 0 });
    await nextTurn();
    const outcomes = await Promise.all([lead, ...ids.slice(1).map((_id, i) => batcher.insert({ _id, n: i + 1 }))]);
    // The repeated id goes alone once its batch is done.
    expect(batches).toEqual([["lead"], ["new-1", "old-1", "new-2", "old-2", "new-3"], ["new-1"]]);
    expect(outcomes).toEqual(["inserted", "inserted", "duplicate", "inserted", "duplicate", "duplicate", "inserted"]);
    const stored = await raw.find({}).sort({ _id: 1 }).toArray();
    expect(stored).toEqual([
      { _id: "lead", n: 0 },
      { _id: "new-1", n: 1 },
      { _id: "new-2", n: 3 },
      { _id: "new-3", n: 6 },
      { _id: "old-1", n: 0 },
      { _id: "old-2", n: 0 },
    ]);
  });

  it("sends an id it stored or found stored before on its own, so that the batch it would have joined stays clean", async () => {
    const raw = db.collection<Doc>(uniqueName("batch_"));
    await raw.insertOne({ _id: "theirs", n: 0 });
    const { collection, batches } = observed(raw);
    const batcher = new InsertBatcher(collection, { maxBatch: 100, maxInFlight: 1 });
    expect(await Promise.all([batcher.insert({ _id: "mine", n: 1 }), batcher.insert({ _id: "theirs", n: 1 })])).toEqual(["inserted", "duplicate"]);
    // A retry storm: the same two ids again among new ones, and one of them deleted meanwhile.
    await raw.deleteOne({ _id: "mine" });
    const outcomes = await Promise.all(["new-1", "mine", "new-2", "theirs", "new-3"].map((_id, n) => batcher.insert({ _id, n })));
    expect(outcomes).toEqual(["inserted", "inserted", "inserted", "duplicate", "inserted"]);
    expect(batches[0]).toEqual(["mine", "theirs"]);
    expect(batches[1]).toEqual(["new-1", "new-2", "new-3"]);
    expect(batches.slice(2).sort()).toEqual([["mine"], ["theirs"]]);
    expect(await raw.findOne({ _id: "mine" })).toEqual({ _id: "mine", n: 1 });
  });

  it("rejects only the caller whose document failed for another reason", async () => {
    const raw = db.collection<Doc>(uniqueName("batch_"));
    const { collection, batches } = observed(raw);
    const batcher = new InsertBatcher(collection, { maxBatch: 100, maxInFlight: 1 });
    const first = batcher.insert({ _id: "lead", n: 0 });
    await nextTurn();
    const good = batcher.insert({ _id: "good", n: 1 });
    // FerretDB refuses a "$"-prefixed field name (code 2) per document.
    const bad = batcher.insert({ _id: "bad", n: 2, $where: "1" });
    const dup = batcher.insert({ _id: "good", n: 3 });
    const [badOutcome, ...others] = await Promise.allSettled([bad, first, good, dup]);
    expect(others).toEqual(["inserted", "inserted", "duplicate"].map((value) => ({ status: "fulfilled", value })));
    expect(badOutcome).toMatchObject({ status: "rejected", reason: { name: "MongoBulkWriteError" } });
    expect(batches).toEqual([["lead"], ["good", "bad"], ["good"]]);
    expect((await raw.find({}).toArray()).map((d) => d._id).sort()).toEqual(["good", "lead"]);
  });

  it("keeps one caller's unstorable document from failing the other callers of its batch", async () => {
    const raw = db.collection<Doc>(uniqueName("batch_"));
    const { collection, batches } = observed(raw);
    const batcher = new InsertBatcher(collection, { maxBatch: 100, maxInFlight: 1 });
    const outcomes = await Promise.allSettled([
      batcher.insert({ _id: "good-1", n: 1 }),
      // No driver can encode a NUL in a key: the whole command fails before it is sent.
      batcher.insert({ _id: "nul-key", n: 2, nested: { "a\u0000b": 1 } }),
      batcher.insert({ _id: "good-2", n: 3 }),
      // FerretDB on PostgreSQL refuses the whole command for a NUL in a value; MongoDB stores it.
      batcher.insert({ _id: "nul-value", n: 4, text: "a\u0000b" }),
      batcher.insert({ _id: "good-3", n: 5 }),
    ]);
    expect(batches[0]).toEqual(["good-1", "nul-key", "good-2", "nul-value", "good-3"]);
    expect(outcomes[1]).toMatchObject({ status: "rejected", reason: { name: "BSONError" } });
    for (const i of [0, 2, 4]) expect(outcomes[i]).toEqual({ status: "fulfilled", value: "inserted" });
    const stored = (await raw.find({}).toArray()).map((d) => d._id).sort();
    expect(stored).toEqual(outcomes[3].status === "fulfilled" ? ["good-1", "good-2", "good-3", "nul-value"] : ["good-1", "good-2", "good-3"]);
  });

  it("sends a lone document with insertOne and tells its duplicate key from any other refusal", async () => {
    const raw = db.collection<Doc>(uniqueName("batch_"));
    const { collection, batches, methods } = observed(raw);
    const batcher = new InsertBatcher(collection, { maxBatch: 100, maxInFlight: 1 });
    expect(await batcher.insert({ _id: "one", n: 1 })).toBe("inserted");
    expect(await batcher.insert({ _id: "one", n: 2 })).toBe("duplicate");
    // FerretDB refuses a "$"-prefixed field name (code 2): not a duplicate, whatever the command.
    await expect(batcher.insert({ _id: "bad", n: 3, $where: "1" })).rejects.toMatchObject({ name: "MongoServerError", code: 2 });
    const [a, b] = await Promise.all([batcher.insert({ _id: "two", n: 4 }), batcher.insert({ _id: "three", n: 5 })]);
    expect([a, b]).toEqual(["inserted", "inserted"]);
    expect(batches).toEqual([["one"], ["one"], ["bad"], ["two", "three"]]);
    expect(methods).toEqual(["insertOne", "insertOne", "insertOne", "insertMany"]);
    expect(await raw.findOne({ _id: "one" })).toEqual({ _id: "one", n: 1 });
  });

  it("splits a queue larger than maxBatch and keeps at most maxInFlight commands running", async () => {
    const raw = db.collection<Doc>(uniqueName("batch_"));
    let running = 0;
    let peak = 0;
    const batches: number[] = [];
    const counting = new Proxy(raw, {
      get(target, prop, receiver) {
        if (prop === "insertMany") {
          return async (docs: Doc[], options: unknown) => {
            running += 1;
            peak = Math.max(peak, running);
            batches.push(docs.length);
            try {
              return await target.insertMany(docs, options as never);
            } finally {
              running -= 1;
            }
          };
        }
        return Reflect.get(target, prop, receiver) as unknown;
      },
    });
    const batcher = new InsertBatcher(counting, { maxBatch: 10, maxInFlight: 2 });
    const outcomes = await Promise.all(Array.from({ length: 45 }, (_, n) => batcher.insert({ _id: `d${n}`, n })));
    expect(outcomes.every((o) => o === "inserted")).toBe(true);
    expect(peak).toBe(2);
    expect(Math.max(...batches)).toBe(10);
    expect(batches.reduce((a, b) => a + b, 0)).toBe(45);
    expect(await raw.countDocuments()).toBe(45);
  });

  it("rejects every caller of a batch when the command itself fails, and keeps working", async () => {
    const raw = db.collection<Doc>(uniqueName("batch_"));
    let calls = 0;
    const flaky = new Proxy(raw, {
      get(target, prop, receiver) {
        if (prop === "insertOne") {
          return async (doc: Doc, options: unknown) => {
            calls += 1;
            if (calls === 1) throw new Error("connection reset");
            return target.insertOne(doc, options as never);
          };
        }
        return Reflect.get(target, prop, receiver) as unknown;
      },
    });
    const batcher = new InsertBatcher(flaky, { maxBatch: 10, maxInFlight: 1 });
    const results = await Promise.allSettled([batcher.insert({ _id: "a", n: 1 })]);
    expect(results.map((r) => r.status)).toEqual(["rejected"]);
    expect(await batcher.insert({ _id: "a", n: 1 })).toBe("inserted");
    expect(await batcher.insert({ _id: "a", n: 1 })).toBe("duplicate");
  });
});
