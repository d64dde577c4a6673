import { jetstreamManager } from "@nats-io/jetstream";
import type { NatsEventBus } from "@toolgate/bus";
import { newCallId, nextCallEvent, subjectCatalogue, success, type CallId, type SubjectCatalogue, type ToolgateEvent } from "@toolgate/contracts";
import { createLogger } from "@toolgate/telemetry";
import { connectTestBus, testDatabase, uniqueName } from "@toolgate/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { CallScheduler } from "./call-scheduler.js";
import { OrphanSweep } from "./orphan-sweep.js";
import { ResourceLocks } from "./resource-locks.js";
import { RunStore, type CallRecord, type RunRecord } from "./run-store.js";
import { runRecord } from "./test-fixtures.js";

// The state a crash between recording calls and proposing them leaves behind, written as the orchestrator writes
// it; then a sweep, against the real stream and store.
const logger = createLogger({ service: "test", level: "silent" });
const GRACE_MS = 5_000;
let database: Awaited<ReturnType<typeof testDatabase>>;
let store: RunStore;
let bus: NatsEventBus;
let subjects: SubjectCatalogue;
// The sweep's clock runs ahead of the wall clock by `ahead`: records minted now are older than the grace when it is past it.
let ahead = 0;
const clock = (): number => Date.now() + ahead;

beforeAll(async () => {
  database = await testDatabase("tg_orphans_");
  store = new RunStore(database.db);
  await store.ensureIndexes();
  subjects = subjectCatalogue(uniqueName("o"));
  bus = await connectTestBus("orphan-test", subjects);
});
afterAll(async () => {
  await (await jetstreamManager(bus.connection)).streams.delete(subjects.stream);
  await bus.close();
  await database.dispose();
});

const run = (status: RunRecord["status"]): RunRecord => runRecord({ status, awaiting: "tools" });

function call(owner: RunRecord, order: number, write = false): CallRecord {
  return {
    _id: newCallId(),
    run_id: owner._id,
    turn: 0,
    provider_call_id: `call_${order}`,
    tool_name: write ? "save_evidence" : "search_sources",
    arguments_json: JSON.stringify({ query: `q${order}` }),
    order,
    write,
    resources: write ? [`evidence:${owner._id}`] : [],
    signature: `sig-${order}`,
    taint: { tainted: false, sources: [] },
    created_at: new Date(),
  };
}

const proposed = async (id: CallId): Promise<boolean> => (await bus.lastEvent("call", id, "proposed")) !== undefined;

const attached: ToolgateEvent[] = [];
const attach = async (event: ToolgateEvent): Promise<void> => {
  attached.push(event);
};

function sweeper(scheduler = new CallScheduler({ store, bus, locks: new ResourceLocks(database.db), logger })): OrphanSweep {
  return new OrphanSweep({ store, scheduler, bus, logger, now: clock, lookbackMs: 3_600_000, graceMs: GRACE_MS, batch: 100, attach });
}

it("proposes what a crash left recorded but unproposed, in host-driven and managed runs, and nothing else", async () => {
  const host = run("external");
  const orphan = call(host, 0);
  const alreadyProposed = call(host, 1);
  const finished = call(host, 2);
  const ended = run("completed");
  const ofEndedRun = call(ended, 0);
  const managed = run("running");
  const managedOrphan = call(managed, 0);
  await Promise.all([store.insertRun(host), store.insertRun(ended), store.insertRun(managed)]);
  await store.insertCalls([orphan, alreadyProposed, finished, ofEndedRun]);
  await store.recordTurn({ run_id: managed._id, turn: 0, response: { kind: "tool_calls", calls: [] }, calls: [managedOrphan], tokens: 0, at: new Date() });
  await new CallScheduler({ store, bus, locks: new ResourceLocks(database.db), logger }).schedule(host, 0, [alreadyProposed]);
  await store.attachResult({
    _id: finished._id,
    run_id: host._id,
    turn: 0,
    provider_call_id: finished.provider_call_id,
    tool_name: finished.tool_name,
    terminal: "completed",
    result: success(finished._id, {}),
    attached_at: new Date(),
  });

  const sweep = sweeper();
  // Inside the grace period the process recording them may still be about to propose them.
  expect(await sweep.sweep()).toEqual([]);
  expect(await proposed(orphan._id)).toBe(false);

  ahead += GRACE_MS + 1;
  const found = await sweep.sweep();
  expect(found.sort()).toEqual([orphan._id, managedOrphan._id].sort());
  expect(await proposed(orphan._id)).toBe(true);
  expect(await proposed(managedOrphan._id)).toBe(true);
  expect(await proposed(ofEndedRun._id)).toBe(false);
  expect(await proposed(finished._id)).toBe(false);

  // The next sweep goes on from where this one stopped: what it looked at is not looked at again, what was
  // recorded since is.
  const later = call(host, 3);
  await store.insertCalls([later]);
  expect(await sweep.sweep()).toEqual([later._id]);
  expect(await proposed(later._id)).toBe(true);
});

it("proposes a write only when it may run: the one before it on the same resource still holds the lock", async () => {
  const host = run("external");
  const first = call(host, 0, true);
  const second = call(host, 1, true);
  await store.insertRun(host);
  await store.insertCalls([first, second]);
  ahead += GRACE_MS + 1;
  const found = await sweeper().sweep();
  expect(found.sort()).toEqual([first._id, second._id].sort());
  expect(await proposed(first._id)).toBe(true);
  expect(await proposed(second._id)).toBe(false);
});

it("reads a backlog a batch at a time, each record once", async () => {
  // One run each: scheduling a turn proposes all of its calls that may run, found in this batch or not.
  const hosts = [0, 1, 2, 3, 4].map(() => run("external"));
  const orphans = hosts.map((h) => call(h, 0));
  for (const h of hosts) await store.insertRun(h);
  await store.insertCalls(orphans);
  const sweep = new OrphanSweep({
    store,
    scheduler: new CallScheduler({ store, bus, locks: new ResourceLocks(database.db), logger }),
    bus,
    logger,
    now: clock,
    lookbackMs: 60_000,
    graceMs: GRACE_MS,
    batch: 2,
    attach,
  });
  ahead += GRACE_MS + 1;
  const seen: CallId[] = [];
  // Earlier tests' records come first; a sweep that finds nothing new has read the whole backlog.
  for (let i = 0; i < 20 && !orphans.every((o) => seen.includes(o._id)); i++) seen.push(...(await sweep.sweep()));
  expect(seen.filter((id) => orphans.some((o) => o._id === id))).toEqual(orphans.map((o) => o._id));
  expect(new Set(seen).size).toBe(seen.length);
  for (const o of orphans) expect(await proposed(o._id)).toBe(true);
});

it("attaches an outcome the stream holds for a proposed call that has none in the store", async () => {
  const host = run("external");
  const late = call(host, 0);
  await store.insertRun(host);
  // Proposed and completed while its record was still on its way (a retry wrote it after the outcome came).
  await new CallScheduler({ store, bus, locks: new ResourceLocks(database.db), logger }).schedule(host, 0, [late]);
  const completed = nextCallEvent({ call_id: late._id, run_id: host._id, principal: host.principal, seq: 2 }, "completed", "executor", {
    result: success(late._id, { n: 1 }),
    duration_ms: 1,
  });
  await bus.publish(completed);
  await store.insertCalls([late]);
  expect(await proposed(late._id)).toBe(true);
  ahead += GRACE_MS + 1;
  attached.length = 0;
  // (Earlier tests' records are read too: a fresh sweeper looks back an hour.)
  expect(await sweeper().sweep()).not.toContain(late._id);
  expect(attached.map((e) => [e.kind === "call" ? e.call_id : e.run_id, e.type])).toEqual([[late._id, "completed"]]);
});

it("reads by range until it has caught up, so records an earlier release stored without a slot are found beyond one batch", async () => {
  const hosts = [0, 1, 2].map(() => run("external"));
  // As an earlier release stored them: no sweep slot.
  const orphans = hosts.map((h) => call(h, 0));
  for (const h of hosts) await store.insertRun(h);
  await store.calls.insertMany(orphans);
  const sweep = new OrphanSweep({
    store,
    scheduler: new CallScheduler({ store, bus, locks: new ResourceLocks(database.db), logger }),
    bus,
    logger,
    now: clock,
    lookbackMs: 60_000,
    graceMs: GRACE_MS,
    batch: 2,
    attach,
  });
  ahead += GRACE_MS + 1;
  const seen: CallId[] = [];
  for (let i = 0; i < 20 && !orphans.every((o) => seen.includes(o._id)); i++) seen.push(...(await sweep.sweep()));
  expect(orphans.filter((o) => !seen.includes(o._id))).toEqual([]);
  for (const o of orphans) expect(await proposed(o._id)).toBe(true);
});
