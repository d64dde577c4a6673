import type { Delivery } from "@toolgate/bus";
import { newCallId, newRunId, nextCallEvent, success } from "@toolgate/contracts";
import { createLogger } from "@toolgate/telemetry";
import { testDatabase } from "@toolgate/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { CallOutcomes, type CallOutcomesDeps } from "./call-outcomes.js";
import { LoopState } from "./loop-state.js";
import { RunStore } from "./run-store.js";

// An outcome that arrives before its call's record, against the real store: a record can land long after its
// proposal (written by a host retry that took over a dead orchestrator's request), so the outcome keeps coming
// back for a while instead of being given up after a few deliveries.
let database: Awaited<ReturnType<typeof testDatabase>>;
let outcomes: CallOutcomes;

beforeAll(async () => {
  database = await testDatabase("tg_outcomes_");
  const store = new RunStore(database.db);
  await store.ensureIndexes();
  // This path reads the store and the process's own state only; nothing else is reached before it decides.
  const unreached = undefined as never;
  const deps: CallOutcomesDeps = {
    store,
    state: new LoopState(),
    logger: createLogger({ service: "test", level: "silent" }),
    now: Date.now,
    bus: unreached,
    contracts: unreached,
    scheduler: unreached,
    waiters: unreached,
    player: unreached,
  };
  outcomes = new CallOutcomes(deps);
});
afterAll(async () => {
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
const completedAt = (time: Date) => {
  const callId = newCallId();
  return nextCallEvent(
    { call_id: callId, run_id: newRunId(), principal: { tenant: "acme", subject: "alice", roles: [] }, seq: 2 },
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
