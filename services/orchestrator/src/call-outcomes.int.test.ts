import { jetstreamManager } from "@nats-io/jetstream";
import type { Delivery, NatsEventBus } from "@toolgate/bus";
import { newCallId, newRunId, nextCallEvent, subjectCatalogue, success, type CallId, type Principal, type RunId } from "@toolgate/contracts";
import { ToolRegistry } from "@toolgate/registry";
import { createLogger } from "@toolgate/telemetry";
import { connectTestBus, testDatabase, uniqueName } from "@toolgate/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { CallOutcomes, type CallOutcomesDeps } from "./call-outcomes.js";
import { CallScheduler } from "./call-scheduler.js";
import { Durable } from "./durable.js";
import { LoopState } from "./loop-state.js";
import { ResourceLocks } from "./resource-locks.js";
import { RunStore, type CallRecord } from "./run-store.js";
import { testContract } from "./test-fixtures.js";

// Outcomes whose calls this process does not hold, against the real stream and store. An outcome that arrives
// before anything shows its call was proposed keeps coming back for a while instead of being given up after a few
// deliveries (a record can land long after its proposal, written by a host retry that took over a dead
// orchestrator's request). One whose call is known only by its proposal in the stream (its proposer meant to
// record it with its outcome and did not get to) is attached with the call, in one document.
const principal: Principal = { tenant: "acme", subject: "alice", roles: [] };
const subjects = subjectCatalogue(uniqueName("o"));
const logger = createLogger({ service: "test", level: "silent" });
const registry = ToolRegistry.from([testContract("lookup")]);
let database: Awaited<ReturnType<typeof testDatabase>>;
let bus: NatsEventBus;
let store: RunStore;
let state: LoopState;
let outcomes: CallOutcomes;

beforeAll(async () => {
  database = await testDatabase("tg_outcomes_");
  store = new RunStore(database.db);
  await store.ensureIndexes();
  bus = await connectTestBus("outcomes-test", subjects);
  state = new LoopState();
  // No run is recorded and none is driven here: the waiters and the turn player are never reached.
  const unreached = undefined as never;
  const deps: CallOutcomesDeps = {
    store,
    state,
    logger,
    now: Date.now,
    bus,
    contracts: { registry: () => registry },
    scheduler: new CallScheduler({ store, bus, locks: new ResourceLocks(database.db), logger }),
    waiters: { resolve: () => undefined, attaching: () => undefined } as never,
    player: unreached,
  };
  outcomes = new CallOutcomes(deps);
});
afterAll(async () => {
  const jsm = await jetstreamManager(bus.connection);
  await jsm.streams.delete(subjects.stream);
  await bus.close();
  await database.dispose();
});

const delivery = (deliveryCount: number): Delivery => ({
  subject: "s",
  streamSeq: 1,
  deliveryCount,
  maxDeliver: 20,
  working: () => undefined,
  signature: { header: undefined, digest: "" },
});
const completedAt = (time: Date, callId: CallId = newCallId(), runId: RunId = newRunId()) => {
  return nextCallEvent(
    { call_id: callId, run_id: runId, principal, seq: 2 },
    "completed",
    "executor",
    { result: success(callId, { n: 1 }), duration_ms: 1 },
    { time },
  );
};

it("keeps redelivering a recent outcome whose call has no record yet, a few seconds apart", async () => {
  const event = completedAt(new Date());
  for (const count of [1, 5, 10, 17]) {
    const disposition = await outcomes.onTerminal(event, delivery(count));
    expect(disposition).toMatchObject({ kind: "retry" });
    expect((disposition as { delayMs: number }).delayMs).toBeLessThanOrEqual(5_000);
  }
});

it("gives up on an outcome for a call never recorded once its window or its deliveries are spent", async () => {
  expect(await outcomes.onTerminal(completedAt(new Date(Date.now() - 61_000)), delivery(2))).toEqual({ kind: "ack" });
  expect(await outcomes.onTerminal(completedAt(new Date()), delivery(18))).toEqual({ kind: "ack" });
});

/** A host call of `runId`, as the orchestrator minted it. */
function hostCall(runId: RunId, providerId: string): CallRecord {
  return {
    _id: newCallId(),
    run_id: runId,
    turn: 1,
    provider_call_id: providerId,
    tool_name: "lookup",
    arguments_json: '{"q":"a"}',
    order: 2,
    write: false,
    resources: [],
    signature: "sig",
    taint: { tainted: false, sources: [] },
    created_at: new Date(),
  };
}

const locks = () => new ResourceLocks(database.db);

const proposalOf = (call: CallRecord) =>
  nextCallEvent({ call_id: call._id, run_id: call.run_id, principal, seq: 0 }, "proposed", "orchestrator", {
    provider_call_id: call.provider_call_id,
    tool_name: call.tool_name,
    arguments_json: call.arguments_json,
    context: {},
    turn: call.turn,
    order: call.order,
    write: call.write,
    resources: call.resources,
    taint: call.taint,
  });

it("attaches the outcome of a call known only by its proposal in the stream, with the call, in one document", async () => {
  const runId = newRunId();
  const call = hostCall(runId, "p-stream");
  await bus.publish(proposalOf(call));
  expect(await outcomes.onTerminal(completedAt(new Date(), call._id, runId), delivery(1))).toEqual({ kind: "ack" });
  expect(await store.calls.findOne({ _id: call._id })).toBeNull();
  expect((await store.getResult(call._id))?.result).toMatchObject({ ok: true });
  const found = await store.getCall(call._id);
  expect(found).toMatchObject({ _id: call._id, run_id: runId, provider_call_id: "p-stream", order: 2, write: false, created_at: expect.any(Date) });
  expect((await store.callsOf(runId)).map((c) => c._id)).toEqual([call._id]);
  expect(await bus.lastEvent("call", call._id, "result_attached")).toMatchObject({ payload: { provider_call_id: "p-stream", ok: true } });
});

it("writes a record left for later with the call's outcome instead, and never on its own afterwards", async () => {
  const runId = newRunId();
  const call = hostCall(runId, "p-lazy");
  const recorded = Durable.lazy(() => store.insertCalls([call], { proposed: true }));
  state.track([call], true, recorded);
  expect(await outcomes.onTerminal(completedAt(new Date(), call._id, runId), delivery(1))).toEqual({ kind: "ack" });
  recorded.begin();
  await recorded.ensure();
  expect(await store.calls.findOne({ _id: call._id })).toBeNull();
  expect(await store.getCall(call._id)).toMatchObject({ _id: call._id, provider_call_id: "p-lazy" });
  expect(state.open(call._id)).toBeUndefined();
});

it("keeps a record of its own for a call recorded before its outcome, and stores the outcome without the call", async () => {
  const runId = newRunId();
  const call = hostCall(runId, "p-early");
  const recorded = Durable.start(() => store.insertCalls([call], { proposed: true }));
  state.track([call], true, recorded);
  expect(await outcomes.onTerminal(completedAt(new Date(), call._id, runId), delivery(1))).toEqual({ kind: "ack" });
  expect(await store.calls.findOne({ _id: call._id })).toMatchObject({ _id: call._id });
  expect(await store.results.findOne({ _id: call._id })).not.toHaveProperty("call_json");
});

it("releases the locks a write was proposed with when its outcome reaches a process that does not hold it", async () => {
  const runId = newRunId();
  // The contract in force names no such tool now: what the write locks comes from its proposal.
  const call = { ...hostCall(runId, "p-write"), tool_name: "retired_note", write: true, resources: [`task:${uniqueName("t")}`] };
  expect(await locks().acquire(call.resources, call._id)).toBe(true);
  await bus.publish(proposalOf(call));
  expect(await outcomes.onTerminal(completedAt(new Date(), call._id, runId), delivery(1))).toEqual({ kind: "ack" });
  expect(await store.getCall(call._id)).toMatchObject({ write: true, resources: call.resources });
  expect(await locks().acquire(call.resources, "another-call")).toBe(true);
});
