import type { Logger } from "@toolgate/telemetry";
import { checkApprovalWaits, checkWallClock } from "./budgets.js";
import type { CallScheduler } from "./call-scheduler.js";
import type { LoopState } from "./loop-state.js";
import type { OrphanSweep } from "./orphan-sweep.js";
import type { RunEnds } from "./run-ends.js";
import type { RunStore } from "./run-store.js";
import type { TurnPlayer } from "./turn-player.js";

export interface RunRecoveryDeps {
  store: RunStore;
  scheduler: CallScheduler;
  state: LoopState;
  player: TurnPlayer;
  ends: RunEnds;
  orphans: OrphanSweep;
  logger: Logger;
  now: () => number;
}

/**
 * What keeps runs moving when nothing else does: periodic sweeps (the wall-clock and approval-wait budgets,
 * writes waiting for a lock) and, at start, picking up the runs a previous process left behind.
 */
export class RunRecovery {
  readonly #deps: RunRecoveryDeps;

  constructor(deps: RunRecoveryDeps) {
    this.#deps = deps;
  }

  /**
   * Stops runs past their wall clock or with a call waiting for a human too long, and retries writes waiting
   * for a resource lock. Runs this process drives are checked from memory; `full` also looks at every running
   * run (those other, perhaps dead, replicas were watching), and `orphaned` proposes the calls recorded since
   * the last such sweep that were never proposed, in runs of every kind ({@link OrphanSweep}).
   */
  async sweep(full = false, orphaned = full): Promise<void> {
    const { store, scheduler, state, ends, orphans, now } = this.#deps;
    if (full) for (const runId of await store.runningRunIds()) state.watched.add(runId);
    if (orphaned) await orphans.sweep();
    // Which writes have ended is read from the store: another replica may have handled some of their outcomes.
    for (const [runId, turn] of [...scheduler.blocked]) {
      const active = state.active(runId);
      if (active && active.run.turn === turn) {
        await scheduler.schedule(active.run, turn, active.calls);
        continue;
      }
      const run = state.external(runId)?.run ?? (await store.getRun(runId));
      if (run && (run.status === "running" || run.status === "external")) await scheduler.schedule(run, turn);
      else scheduler.blocked.delete(runId);
    }
    for (const runId of [...state.watched]) {
      const active = state.active(runId);
      const run = active?.run ?? (await store.getRun(runId));
      if (!run || run.status !== "running") {
        state.forget(runId);
        continue;
      }
      const late = checkWallClock(run.budgets, now() - run.created_at.getTime());
      if (late) {
        await ends.stop(run, late.reason, late.message);
        continue;
      }
      // A run driven here has calls waiting for a human only if this process saw them asked for.
      if (active && !state.waitingForApproval.has(runId)) continue;
      const overdue = checkApprovalWaits(run.budgets, await store.pendingApprovals(runId), now());
      if (overdue) await ends.stop(run, overdue.reason, overdue.message);
    }
  }

  /**
   * Picks up runs a previous process left behind, from what the store and the stream hold: plays turns that
   * were claimed but never answered, and re-proposes the calls of answered turns that have no outcome
   * (proposals are idempotent by event id; the executor replays finished keys). Returns how many it found.
   */
  async resume(): Promise<number> {
    const { store, state, player, ends, logger } = this.#deps;
    const runIds = await store.runningRunIds();
    for (const runId of runIds) {
      // Ended, but the process that ended it died before the run document or the end event said so.
      const end = await store.endOf(runId);
      if (end) {
        const run = await store.getRun(runId);
        await store.mirrorEnd(runId, end);
        if (run) await ends.publish(run, end);
        continue;
      }
      const loaded = await player.load(runId);
      if (!loaded) continue;
      const { active, answer } = loaded;
      state.activate(active);
      const step = answer ? player.continueTurn(active, answer.response, answer.calls, answer.tokens) : player.play(active);
      step.catch((error: unknown) => logger.error({ err: error, run_id: runId }, "run step failed"));
    }
    return runIds.length;
  }
}
