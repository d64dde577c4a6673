import type { EventBus } from "@toolgate/bus";
import { runEvent, type RunId } from "@toolgate/contracts";
import type { Counter, Logger, RunTraces } from "@toolgate/telemetry";
import type { StopReason } from "./budgets.js";
import type { LoopState, ProgressWriter } from "./loop-state.js";
import { recordRunSpan } from "./run-spans.js";
import type { RunEnd, RunRecord, RunStore } from "./run-store.js";

/**
 * How managed runs end: once per run, whichever process, sweep or answer gets there first (the end is claimed
 * by a unique insert), mirrored into the run document and announced with the run's end event.
 */
export class RunEnds {
  constructor(
    private readonly deps: {
      store: RunStore;
      bus: EventBus;
      state: LoopState;
      progress: ProgressWriter;
      instanceId: string;
      logger: Logger;
      /** Counts each stop this process claims, by reason (`toolgate_runs_stopped_total`). */
      stopped?: Counter<"reason">;
      /** With spans: the run's span is recorded by the process that ends it. */
      traces?: RunTraces | undefined;
    },
  ) {}

  /**
   * Ends the run as stopped; false when another end (a completion, another stop) got there first. The latest
   * claimed turn and the next are closed with the end, so that a turn being played anywhere proposes nothing.
   */
  async stop(run: RunRecord, reason: StopReason, message: string): Promise<boolean> {
    const end: RunEnd = {
      status: "stopped",
      turn: run.turn,
      final_text: message,
      stop_reason: reason,
      tool_calls: run.tool_calls,
      responses: run.responses,
      usage: run.usage,
    };
    const latest = await this.deps.store.latestClaimedTurn(run._id, run.turn);
    if (!(await this.#claim(run._id, end, [latest, latest + 1]))) return false;
    this.deps.logger.info({ run_id: run._id, reason }, "run stopped");
    this.deps.stopped?.inc({ reason });
    if (this.deps.traces) recordRunSpan(this.deps.traces, run, end);
    await this.publish(run, end);
    return true;
  }

  /** Ends the run as completed with its final answer; false when a stop got there first. */
  async complete(run: RunRecord, end: Extract<RunEnd, { status: "completed" }>): Promise<boolean> {
    if (!(await this.#claim(run._id, end))) return false;
    if (this.deps.traces) recordRunSpan(this.deps.traces, run, end);
    await this.publish(run, end);
    return true;
  }

  /** Publishes a run's end event; its id is fixed by the run and turn, so publishing again is harmless. */
  async publish(run: Pick<RunRecord, "_id" | "principal">, end: RunEnd): Promise<void> {
    const origin = { run_id: run._id, principal: run.principal };
    await this.deps.bus.publish(
      end.status === "completed"
        ? runEvent(origin, "completed", "orchestrator", end.turn, {
            turns: end.turn + 1,
            tool_calls: end.tool_calls,
            final_text: end.final_text.slice(0, 64 * 1024),
          })
        : runEvent(origin, "stopped", "orchestrator", end.turn, { reason: end.stop_reason, message: end.final_text }),
    );
  }

  /**
   * Another step (or process) ended the run: this process stops driving and watching it. The run document
   * may have lost that end to a concurrent progress write (or its writer crashed): make it say so again.
   */
  async endedElsewhere(runId: RunId): Promise<void> {
    this.deps.state.forget(runId);
    const end = await this.deps.store.endOf(runId);
    if (end) await this.deps.store.mirrorEnd(runId, end);
  }

  async #claim(runId: RunId, end: RunEnd, closeTurns: readonly number[] = []): Promise<boolean> {
    // Progress still to be written behind would otherwise land after the end and hide it for a moment.
    await this.deps.progress.cancel(runId);
    if (!(await this.deps.store.endRun(runId, this.deps.instanceId, end, closeTurns))) {
      await this.endedElsewhere(runId);
      return false;
    }
    this.deps.state.forget(runId);
    return true;
  }
}
