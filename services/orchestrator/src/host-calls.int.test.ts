import { jetstreamManager } from "@nats-io/jetstream";
import type { NatsEventBus } from "@toolgate/bus";
import { ClaimLedger, PublishError, type EventBus } from "@toolgate/bus";
import { subjectCatalogue, type CallId, type Principal, type RunContext, type ToolgateEvent } from "@toolgate/contracts";
import { ToolRegistry } from "@toolgate/registry";
import { createLogger } from "@toolgate/telemetry";
import { connectTestBus, testDatabase, uniqueName } from "@toolgate/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { CallScheduler } from "./call-scheduler.js";
import { HostCalls } from "./host-calls.js";
import { LoopState } from "./loop-state.js";
import { OrphanSweep } from "./orphan-sweep.js";
import { ResourceLocks } from "./resource-locks.js";
import { RunStore } from "./run-store.js";
import { runRecord, testContract } from "./test-fixtures.js";

// How a host's calls are recorded, against the real stream and store: a call proposed at once is recorded once its
// proposal is in the stream, outside the orphan sweep's slots (the sweep never reads it back); a call whose
// proposal did not land is recorded for the sweep, which proposes it.
const logger = createLogger({ service: "test", level: "silent" });
const principal: Principal = { tenant: "acme", subject: "alice", roles: ["researcher"] };
const GRACE_MS = 5_000;
let database: Awaited<ReturnType<typeof testDatabase>>;
let store: RunStore;
let bus: NatsEventBus;
let ledger: ClaimLedger;
const subjects = subjectCatalogue(uniqueName("h"));
const ledgerStream = `${subjects.stream}_HOST_CALLS`;
const registry = ToolRegistry.from([testContract("note"), testContract("lookup")]);

beforeAll(async () => {
  database = await testDatabase("tg_host_calls_");
  store = new RunStore(database.db);
  await store.ensureIndexes();
  bus = await connectTestBus("host-calls-test", subjects);
  ledger = await ClaimLedger.open(bus, { stream: ledgerStream, subjectPrefix: `${subjects.prefix}.host_calls`, replicas: 1, maxValueBytes: 16 * 1024 });
});
afterAll(async () => {
  const jsm = await jetstreamManager(bus.connection);
  await jsm.streams.delete(ledgerStream);
  await jsm.streams.delete(subjects.stream);
  await bus.close();
  await database.dispose();
});

/** The bus, except that proposals are refused while `down` (a stream that does not answer). */
function flakyBus(): EventBus & { down: boolean } {
  const flaky = Object.create(bus) as EventBus & { down: boolean };
  flaky.down = false;
  flaky.publish = (event: ToolgateEvent) =>
    flaky.down && event.type === "proposed" ? Promise.reject(new PublishError(`publish of ${event.id} was not acknowledged`)) : bus.publish(event);
  return flaky;
}

function hostCalls(on: EventBus, recordDelayMs?: number): HostCalls {
  const scheduler = new CallScheduler({ store, bus: on, locks: new ResourceLocks(database.db), logger });
  return new HostCalls({
    ...(recordDelayMs === undefined ? {} : { recordDelayMs }),
    store,
    bus: on,
    ledger,
    contracts: { registry: () => registry },
    scheduler,
    state: new LoopState(),
    newRun: (owner: Principal, context: RunContext) => runRecord({ status: "external", principal: owner, context }),
    logger,
    now: Date.now,
  });
}

const proposed = async (id: CallId): Promise<boolean> => (await bus.lastEvent("call", id, "proposed")) !== undefined;
const slotOf = async (id: CallId): Promise<number | undefined> => (await store.calls.findOne({ _id: id }))?.sweep_slot;

it("records a call proposed at once after its proposal is in the stream, where the orphan sweep never reads it", async () => {
  const host = hostCalls(bus);
  const { runId } = await host.submit(principal, { context: {}, calls: [{ id: "p0", name: "lookup", arguments: '{"q":"a"}' }] });
  // A second submission in the same run: its provider id is claimed on the ledger before anything is proposed.
  const { callIds } = await host.submit(principal, { runId, context: {}, calls: [{ id: "p1", name: "lookup", arguments: '{"q":"b"}' }] });
  const [callId] = callIds as [CallId];
  expect(await proposed(callId)).toBe(true);
  expect(await store.getCall(callId)).toMatchObject({ _id: callId, run_id: runId, provider_call_id: "p1" });
  expect(await slotOf(callId)).toBeUndefined();
});

it("records a call whose proposal did not land for the orphan sweep, which proposes it", async () => {
  const flaky = flakyBus();
  const host = hostCalls(flaky);
  const { runId } = await host.submit(principal, { context: {}, calls: [{ id: "p0", name: "lookup", arguments: '{"q":"a"}' }] });
  flaky.down = true;
  let callIds: CallId[] = [];
  await expect(
    host.submit(principal, { runId, context: {}, calls: [{ id: "p1", name: "lookup", arguments: '{"q":"b"}' }] }, (ids) => (callIds = ids)),
  ).rejects.toThrow(PublishError);
  const [orphan] = callIds as [CallId];
  // The host was not answered, but the call is recorded: the process could die here, and its claim stands.
  await expect.poll(() => slotOf(orphan)).toBeTypeOf("number");
  expect(await proposed(orphan)).toBe(false);

  const sweep = new OrphanSweep({
    store,
    scheduler: new CallScheduler({ store, bus, locks: new ResourceLocks(database.db), logger }),
    bus,
    logger,
    now: () => Date.now() + GRACE_MS + 1,
    lookbackMs: 60_000,
    graceMs: GRACE_MS,
    batch: 100,
    attach: async () => undefined,
  });
  // The first sweeps of a process read by range (records an earlier release stored without a slot); then by slot.
  const found: CallId[] = [];
  for (let i = 0; i < 5; i++) found.push(...(await sweep.sweep()));
  expect(found).toEqual([orphan]);
  expect(await proposed(orphan)).toBe(true);
});

const recordOf = (id: CallId) => store.calls.findOne({ _id: id });

it("leaves the records of calls proposed at once to their outcomes when the caller answers with outcomes, until asked for them", async () => {
  const host = hostCalls(bus, 60_000);
  const { runId } = await host.submit(principal, { context: {}, calls: [{ id: "p0", name: "lookup", arguments: '{"q":"a"}' }] });
  const { callIds } = await host.submit(
    principal,
    {
      runId,
      context: {},
      calls: [
        { id: "r1", name: "lookup", arguments: '{"q":"b"}' },
        { id: "w1", name: "note", arguments: '{"q":"c"}' },
      ],
    },
    undefined,
    { answersWithOutcomes: true },
  );
  const [read, write] = callIds as [CallId, CallId];
  expect(await proposed(read)).toBe(true);
  // The lone write's proposal says what it is and what it locks: a replica that gets its outcome releases them.
  expect(await bus.lastEvent("call", write, "proposed")).toMatchObject({ payload: { write: true, resources: [], order: 1 } });
  expect(await recordOf(read)).toBeNull();
  expect(await recordOf(write)).toBeNull();
  await host.ensureRecorded([read, write]);
  expect(await recordOf(read)).toMatchObject({ _id: read, provider_call_id: "r1" });
  expect(await recordOf(write)).toMatchObject({ _id: write, write: true });
  expect(await slotOf(read)).toBeUndefined();
});

it("records the writes of a submission that queues them before anything runs, whatever the caller answers with", async () => {
  const host = hostCalls(bus, 60_000);
  const { callIds } = await host.submit(
    principal,
    {
      context: {},
      calls: [
        { id: "w2", name: "note", arguments: '{"q":"a"}' },
        { id: "w3", name: "note", arguments: '{"q":"b"}' },
      ],
    },
    undefined,
    { answersWithOutcomes: true },
  );
  const [first, second] = callIds as [CallId, CallId];
  expect(await recordOf(first)).toMatchObject({ _id: first, write: true });
  expect(await recordOf(second)).toMatchObject({ _id: second, write: true });
  expect(await proposed(second)).toBe(false);
});

it("records such a call on its own once it has been in flight for the record delay", async () => {
  const host = hostCalls(bus, 50);
  const { callIds } = await host.submit(principal, { context: {}, calls: [{ id: "r2", name: "lookup", arguments: '{"q":"a"}' }] }, undefined, {
    answersWithOutcomes: true,
  });
  const [read] = callIds as [CallId];
  await expect.poll(() => recordOf(read)).toMatchObject({ _id: read, provider_call_id: "r2" });
  expect(await slotOf(read)).toBeUndefined();
});

it("records such a call for the orphan sweep before failing when its proposal did not land", async () => {
  const flaky = flakyBus();
  const host = hostCalls(flaky, 60_000);
  const { runId } = await host.submit(principal, { context: {}, calls: [{ id: "p0", name: "lookup", arguments: '{"q":"a"}' }] });
  flaky.down = true;
  let callIds: CallId[] = [];
  await expect(
    host.submit(principal, { runId, context: {}, calls: [{ id: "r3", name: "lookup", arguments: '{"q":"b"}' }] }, (ids) => (callIds = ids), {
      answersWithOutcomes: true,
    }),
  ).rejects.toThrow(PublishError);
  const [orphan] = callIds as [CallId];
  await expect.poll(() => slotOf(orphan)).toBeTypeOf("number");
});
