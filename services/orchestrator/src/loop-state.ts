import type { CallId, RunId } from "@toolgate/contracts";
import type { Logger } from "@toolgate/telemetry";
import { Durable } from "./durable.js";
import type { CallRecord, CallResultRecord, RunProgress, RunRecord, RunStore } from "./run-store.js";

/** A call this process proposed and has no outcome for yet, with the write that stores its record. */
export interface OpenCall {
  call: CallRecord;
  external: boolean;
  recorded: Durable;
}

/** A host-driven run this process created or checked: its record's write and its `started` event's publish. */
export interface ExternalRun {
  run: RunRecord;
  recorded: Durable;
  started: Durable;
}

/**
 * A managed run this process drives: what its next step needs, as of the last step this process took (the
 * store has it too, written behind). A replica that receives one of its outcomes without this state loads
 * it from the store and drives the run from then on; turn claims keep two drivers from both advancing it.
 */
export interface ActiveRun {
  run: RunRecord;
  /** Every attached result of the run, by call id. */
  results: Map<CallId, CallResultRecord>;
  /** The calls of the current turn. */
  calls: CallRecord[];
  /** The turn this process is claiming or has claimed, so two of its handlers never both try. */
  claiming?: number;
}

const MAX_CACHED = 100_000;

/** Oldest first out: a call or run another replica finished is only a cache miss, never wrong. */
function remember<K, V>(map: Map<K, V>, key: K, value: V): void {
  if (map.size >= MAX_CACHED && !map.has(key)) map.delete(map.keys().next().value!);
  map.set(key, value);
}

/**
 * What the run loop knows in memory, so that no step reads back what this process wrote itself: the calls it
 * proposed that are still open, the host-driven runs it has seen, the managed runs it drives, and the runs it
 * watches for their wall-clock and approval-wait budgets.
 */
export class LoopState {
  readonly #open = new Map<CallId, OpenCall>();
  /** Open writes per `<run>:<turn>` among the calls this process proposed. */
  readonly #openWrites = new Map<string, number>();
  /** Host-driven runs this process created or checked (their owner and status never change), and their records. */
  readonly #external = new Map<RunId, ExternalRun>();
  readonly #active = new Map<RunId, ActiveRun>();
  /** Managed runs this process watches for their wall-clock and approval-wait budgets. */
  readonly watched = new Set<RunId>();
  /** Runs with a call this process saw waiting for a human (their approval-wait budget needs a read). */
  readonly waitingForApproval = new Set<RunId>();

  track(records: readonly CallRecord[], external: boolean, recorded: Durable): void {
    for (const call of records) {
      if (!this.#open.has(call._id) && call.write) {
        const key = `${call.run_id}:${call.turn}`;
        this.#openWrites.set(key, (this.#openWrites.get(key) ?? 0) + 1);
      }
      remember(this.#open, call._id, { call, external, recorded });
    }
  }

  untrack(call: CallRecord): void {
    if (!this.#open.delete(call._id) || !call.write) return;
    const key = `${call.run_id}:${call.turn}`;
    const left = (this.#openWrites.get(key) ?? 1) - 1;
    if (left > 0) this.#openWrites.set(key, left);
    else this.#openWrites.delete(key);
  }

  open(callId: CallId): OpenCall | undefined {
    return this.#open.get(callId);
  }

  /** The open calls of one run. */
  openOf(runId: RunId): OpenCall[] {
    return [...this.#open.values()].filter((o) => o.call.run_id === runId);
  }

  /** Whether a write of `call`'s run and turn that this process proposed is still open. */
  writesPending(call: CallRecord): boolean {
    return (this.#openWrites.get(`${call.run_id}:${call.turn}`) ?? 0) > 0;
  }

  external(runId: RunId): ExternalRun | undefined {
    return this.#external.get(runId);
  }

  rememberExternal(run: RunRecord, recorded: Durable, started: Durable = Durable.done()): void {
    remember(this.#external, run._id, { run, recorded, started });
  }

  active(runId: RunId): ActiveRun | undefined {
    return this.#active.get(runId);
  }

  activate(state: ActiveRun): void {
    remember(this.#active, state.run._id, state);
    this.watched.add(state.run._id);
  }

  /** This process no longer drives the run (it ended, or another replica took a turn of it). */
  deactivate(runId: RunId): void {
    this.#active.delete(runId);
  }

  /** The run ended: nothing more to drive or watch. */
  forget(runId: RunId): void {
    this.#active.delete(runId);
    this.watched.delete(runId);
    this.waitingForApproval.delete(runId);
  }
}

interface QueuedProgress {
  pending: RunProgress | undefined;
  timer: NodeJS.Timeout | undefined;
  writing: Promise<void> | undefined;
  /** When the last write started. */
  last: number;
}

/**
 * Writes a managed run's progress (turn, responses, usage) to its document behind the loop, at most once per
 * `intervalMs` per run, the latest state winning: the document is a view of the turn claims and turn records,
 * which are what a restart goes by, and an update costs FerretDB a read and a whole-document write that the
 * calls of the turn would wait behind. A run's end writes its final state itself.
 */
export class ProgressWriter {
  readonly #runs = new Map<RunId, QueuedProgress>();

  constructor(
    private readonly store: RunStore,
    private readonly logger: Logger,
    private readonly intervalMs = 1_000,
    private readonly now: () => number = Date.now,
  ) {}

  /** Queues `progress` (merged with what is queued) for `runId`; never throws (a failure is logged). */
  write(runId: RunId, progress: RunProgress): void {
    const entry = this.#runs.get(runId) ?? { pending: undefined, timer: undefined, writing: undefined, last: -Infinity };
    remember(this.#runs, runId, entry);
    entry.pending = { ...entry.pending, ...progress };
    this.#schedule(runId, entry);
  }

  /** Drops what is queued for `runId` and waits for a write in flight: the run is ending. */
  async cancel(runId: RunId): Promise<void> {
    const entry = this.#runs.get(runId);
    if (!entry) return;
    clearTimeout(entry.timer);
    this.#runs.delete(runId);
    await entry.writing;
  }

  #schedule(runId: RunId, entry: QueuedProgress): void {
    if (entry.timer || entry.writing || !entry.pending) return;
    const wait = entry.last + this.intervalMs - this.now();
    if (wait > 0) {
      entry.timer = setTimeout(() => {
        entry.timer = undefined;
        this.#schedule(runId, entry);
      }, wait);
      entry.timer.unref();
      return;
    }
    const progress = entry.pending;
    entry.pending = undefined;
    entry.last = this.now();
    entry.writing = this.store
      .recordProgress(runId, progress)
      .then(() => undefined)
      .catch((error: unknown) => this.logger.warn({ err: error, run_id: runId }, "run progress not written; the turn records stand"))
      .finally(() => {
        entry.writing = undefined;
        // Kept (with when it last wrote) until the run ends, so that the next progress waits its turn.
        if (this.#runs.get(runId) === entry) this.#schedule(runId, entry);
      });
  }
}
