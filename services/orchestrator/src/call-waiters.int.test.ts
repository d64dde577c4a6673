import type { NatsEventBus } from "@toolgate/bus";
import { newCallId, newRunId, subjectCatalogue, success, type SubjectCatalogue } from "@toolgate/contracts";
import { connectTestBus, testDatabase, uniqueName } from "@toolgate/testkit";
import { jetstreamManager } from "@nats-io/jetstream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CallWaiters } from "./call-waiters.js";
import { RunStore, type CallResultRecord } from "./run-store.js";

// An outcome is given to its waiters before its attach is stored (the host is answered on the terminal event).
// A request that asks in between must get it once the attach lands, not after its whole wait.
let database: Awaited<ReturnType<typeof testDatabase>>;
let store: RunStore;
let bus: NatsEventBus;
let subjects: SubjectCatalogue;
let waiters: CallWaiters;

beforeAll(async () => {
  database = await testDatabase("tg_waiters_");
  store = new RunStore(database.db);
  await store.ensureIndexes();
  subjects = subjectCatalogue(uniqueName("w"));
  bus = await connectTestBus("waiters-test", subjects);
  // A poll far beyond the test's waits: only the attach in flight can answer in time.
  waiters = new CallWaiters({ store, bus, subjects, pollMs: 60_000 });
});
afterAll(async () => {
  waiters.close();
  await (await jetstreamManager(bus.connection)).streams.delete(subjects.stream);
  await bus.close();
  await database.dispose();
});

function outcome(): CallResultRecord {
  const callId = newCallId();
  return {
    _id: callId,
    run_id: newRunId(),
    turn: 0,
    provider_call_id: "host_1",
    tool_name: "search_sources",
    terminal: "completed",
    result: success(callId, { items: [] }),
    attached_at: new Date(),
  };
}

/** Stores `record` once `release` is called: an attach in flight for as long as the test says. */
function slowAttach(record: CallResultRecord): { write: Promise<unknown>; release: () => void } {
  let release: () => void = () => undefined;
  const landed = new Promise<void>((resolve) => (release = resolve));
  return { write: landed.then(() => store.attachResult(record)), release };
}

describe("CallWaiters", () => {
  it("answers a request registered after the outcome was given out, once the attach in flight lands", async () => {
    const record = outcome();
    const attach = slowAttach(record);
    // The terminal event: whoever waits is answered, and the attach starts.
    waiters.resolve(record._id, record.result);
    waiters.attaching(record._id, attach.write);
    // Too late to be told, too early to find it stored.
    const waiting = waiters.register([record._id], { storedFirst: true }).wait(30_000);
    const read = waiters.storedResult(record._id);
    attach.release();
    const [results, stored] = await Promise.all([waiting, read]);
    expect(results.get(record._id)).toEqual(record.result);
    expect(stored).toMatchObject({ _id: record._id, terminal: "completed", result: record.result });
  });

  it("reads the store as it is when no attach of the call is in flight, and after one that failed", async () => {
    const absent = outcome();
    expect(await waiters.storedResult(absent._id)).toBeNull();
    const failed = outcome();
    waiters.attaching(failed._id, Promise.reject(new Error("connection reset")));
    expect(await waiters.storedResult(failed._id)).toBeNull();
    // Stored later by the redelivered event, it is found.
    await store.attachResult(failed);
    expect(await waiters.storedResult(failed._id)).toMatchObject({ _id: failed._id });
  });
});
