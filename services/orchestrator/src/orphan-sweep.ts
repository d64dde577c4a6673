import type { EventBus } from "@toolgate/bus";
import { callIdFloor, TERMINAL_CALL_EVENT_TYPES, type CallId, type RunId, type ToolgateEvent } from "@toolgate/contracts";
import type { Logger } from "@toolgate/telemetry";
import type { CallScheduler } from "./call-scheduler.js";
import type { CallRecord, RunStore } from "./run-store.js";

export interface OrphanSweepDeps {
  store: RunStore;
  scheduler: CallScheduler;
  bus: EventBus;
  logger: Logger;
  now: () => number;
  /** How far back the first sweep of a process looks; later sweeps go on from where the last one stopped. */
  lookbackMs: number;
  /** Calls younger than this are left to the process that is recording them. */
  graceMs: number;
  /** Calls looked at per sweep at most (the rest wait for the next sweep). */
  batch: number;
  /**
   * Attaches an outcome the stream holds for a call that has none in the store, as the terminal consumer would
   * have: for an outcome that arrived before its call's record (a record written late, by a retry that took
   * over a dead process's request) and was given up on.
   */
  attach: (event: ToolgateEvent) => Promise<unknown>;
}

/**
 * Finds calls that were recorded but never proposed — their process died between the two, or the stream was
 * down when it tried — in runs of every kind, and schedules their turn again as the outcome of an earlier call
 * would have: proposals are idempotent by event id, and scheduling proposes only what may run now (a write
 * still waits for the one before it).
 *
 * A call is looked at once it is older than the grace period, and then never again once it has its outcome or
 * its proposal is in the stream: what follows a proposal is carried by durable consumers, not by this sweep.
 * Each process keeps its own cursor through the records — host calls by id (ids sort by the time they were
 * minted), turn answers by when they were recorded — so a sweep reads only what was recorded since the last one,
 * slot by slot (`SWEEP_SLOT_MS`: indexed equalities, never a scan of the collection); replicas sweeping the same
 * records propose nothing twice. A process's first sweeps read by range instead, until one comes back short of
 * a batch: they also find what an earlier release recorded without a slot. The grace period also covers replicas whose clocks run behind
 * this one's by less than it.
 */
export class OrphanSweep {
  readonly #deps: OrphanSweepDeps;
  /** The last host call id read, and when the last turn answer read was recorded. */
  #cursor: { callId: CallId; answersAt: Date } | undefined;
  /** Whether this process's range reads have caught up with the records (see the class comment). */
  #caughtUp = false;

  constructor(deps: OrphanSweepDeps) {
    this.#deps = deps;
  }

  /** Returns the calls it found unproposed in live runs, and scheduled. */
  async sweep(): Promise<CallId[]> {
    const { store, now, lookbackMs, graceMs, batch } = this.#deps;
    const cursor = (this.#cursor ??= { callId: callIdFloor(now() - lookbackMs), answersAt: new Date(now() - lookbackMs) });
    const upTo = now() - graceMs;
    const legacy = !this.#caughtUp;
    const [hosts, answers] = await Promise.all([
      legacy ? store.callsWithIdsBetween(cursor.callId, callIdFloor(upTo), batch) : store.callsInSlotsBetween(cursor.callId, callIdFloor(upTo), batch),
      store.answersRecordedBetween(cursor.answersAt, new Date(upTo), batch, legacy),
    ]);
    const found = await this.#reschedule(await this.#unproposed([...hosts, ...answers.flatMap((a) => a.calls)], legacy));
    // Range reads go on while they come back full: records stored without a slot may lie beyond the batch.
    this.#caughtUp ||= hosts.length < batch && answers.length < batch;
    this.#cursor = {
      callId: hosts.length === batch ? hosts[hosts.length - 1]!._id : callIdFloor(upTo),
      // Answers recorded in the same millisecond as the last one of a full batch are read again next time:
      // none is skipped when a batch ends inside that millisecond (a batch of one millisecond moves on).
      answersAt: answers.length === batch ? new Date(Math.max(answers[answers.length - 1]!.at.getTime(), cursor.answersAt.getTime() + 1)) : new Date(upTo),
    };
    return found;
  }

  /**
   * The calls with neither an outcome nor a proposal in the stream. A proposed call without an outcome in the
   * store whose outcome is in the stream gets it attached.
   */
  async #unproposed(calls: readonly CallRecord[], legacy: boolean): Promise<CallRecord[]> {
    if (calls.length === 0) return [];
    const { store, bus, attach } = this.#deps;
    const done = await store.resultIds(
      calls.map((c) => c._id),
      legacy,
    );
    const open = calls.filter((c) => !done.has(c._id));
    const proposed = await Promise.all(open.map(async (c) => (await bus.lastEvent("call", c._id, "proposed")) !== undefined));
    await Promise.all(
      open
        .filter((_, i) => proposed[i])
        .map(async (c) => {
          for (const type of TERMINAL_CALL_EVENT_TYPES) {
            const outcome = await bus.lastEvent("call", c._id, type);
            if (outcome) {
              this.#deps.logger.warn({ call_id: c._id, run_id: c.run_id, type }, "an outcome in the stream was never attached; attaching it now");
              await attach(outcome);
              return;
            }
          }
        }),
    );
    return open.filter((_, i) => !proposed[i]);
  }

  async #reschedule(calls: readonly CallRecord[]): Promise<CallId[]> {
    const { store, scheduler, logger } = this.#deps;
    const turns = new Map<string, { runId: RunId; turn: number; calls: CallRecord[] }>();
    for (const call of calls) {
      const key = `${call.run_id}:${call.turn}`;
      const entry = turns.get(key) ?? { runId: call.run_id, turn: call.turn, calls: [] };
      entry.calls.push(call);
      turns.set(key, entry);
    }
    // Turns are independent: scheduled side by side (a backlog after an outage clears in one round of writes).
    const scheduled = await Promise.all(
      [...turns.values()].map(async ({ runId, turn, calls: orphans }) => {
        const run = await store.getRun(runId);
        if (!run || (run.status !== "running" && run.status !== "external")) return [];
        logger.warn({ run_id: runId, turn, call_ids: orphans.map((c) => c._id) }, "calls recorded but never proposed; proposing them now");
        // A managed run's calls are in its turn's answer, a host's in their own records: the scheduler reads the
        // latter itself.
        const answer = run.status === "running" ? await store.getTurn(runId, turn) : null;
        await scheduler.schedule(run, turn, answer?.calls);
        return orphans.map((c) => c._id);
      }),
    );
    return scheduled.flat();
  }
}
