import type { ClaimLedger, EventBus } from "@toolgate/bus";
import { runEvent, type CallId, type Principal, type ResultEnvelope, type RunContext, type RunId } from "@toolgate/contracts";
import type { ProposedToolCall } from "@toolgate/models";
import type { ToolRegistry } from "@toolgate/registry";
import type { Logger, RunTraces } from "@toolgate/telemetry";
import type { CallScheduler } from "./call-scheduler.js";
import { Durable } from "./durable.js";
import { hostCallKey, HostCallConflictError, HostCallKeys } from "./host-call-keys.js";
import type { LoopState } from "./loop-state.js";
import { callRecords, RunRequestError, taintFrom, untrustedTools, validateCalls } from "./proposals.js";
import type { CallRecord, RunRecord, RunStore } from "./run-store.js";
import { recordHostRunSpan } from "./run-spans.js";

/**
 * A host's calls and where they go: its run (`runId`), a new run, or the run fixed when a client idempotency key
 * was claimed (`pinnedRunId`: created with that id if it does not exist yet, so that a retry lands in the run an
 * earlier attempt may have created).
 */
export interface HostSubmission {
  runId?: RunId;
  pinnedRunId?: RunId;
  /** Whether an earlier attempt with the same key may have created the pinned run. */
  pinnedBefore?: boolean;
  context: RunContext;
  calls: ProposedToolCall[];
}

/**
 * Called before anything is published, with every call id in order and the outcomes of the calls that had
 * ended before (a provider call id submitted again), so that a caller waits only for the others.
 */
export type BeforePublish = (callIds: CallId[], ended?: ReadonlyMap<CallId, ResultEnvelope>) => void;

/** How a submission's caller tells the host about its calls. */
export interface SubmitOptions {
  /**
   * The caller waits for the calls' outcomes and makes the records of those it answers without one durable first
   * ({@link HostCalls.ensureRecorded}). A call proposed at once (not queued behind another write of its
   * submission) that ends sooner is then recorded with its outcome, in one document, instead of in a record of
   * its own and then its outcome.
   */
  answersWithOutcomes?: boolean;
}

export interface HostCallsDeps {
  store: RunStore;
  bus: EventBus;
  /** Where provider call ids are claimed (see {@link HostCallKeys}). */
  ledger: ClaimLedger;
  contracts: { registry(): ToolRegistry };
  scheduler: CallScheduler;
  state: LoopState;
  /** A new host-driven run for `principal` (not yet stored). */
  newRun: (principal: Principal, context: RunContext) => RunRecord;
  logger: Logger;
  now: () => number;
  /** With spans: a new run's span is recorded when the run is created (see `recordHostRunSpan`). */
  traces?: RunTraces | undefined;
  /**
   * With {@link SubmitOptions.answersWithOutcomes}: how long a call proposed at once may be in flight before
   * it is recorded on its own (so that every replica lists it); 0 records it at once.
   */
  recordDelayMs?: number;
}

/**
 * Bring-your-own-loop: the host ran the model; its tool calls are validated, authorized and executed with
 * the same scheduling as Toolgate's own loop. A call waits for no write of the orchestrator's: its proposal is
 * published at once and its record is written alongside.
 */
export class HostCalls {
  readonly #deps: HostCallsDeps;
  readonly #keys: HostCallKeys;

  constructor(deps: HostCallsDeps) {
    this.#deps = deps;
    this.#keys = new HostCallKeys(deps.ledger, deps.store.hostCallKeys);
  }

  /**
   * Proposes the host's calls in its run (a new one without `runId`); the runtime call id of each, in order.
   * Within a run a provider call id is a natural key: the same id with the same tool and arguments is the same
   * call (its id is returned, and it is proposed again only if it has no outcome: proposals are idempotent by
   * event id), with another tool or other arguments a {@link HostCallConflictError}, before anything is proposed.
   */
  async submit(
    principal: Principal,
    request: HostSubmission,
    beforePublish: BeforePublish = () => undefined,
    options: SubmitOptions = {},
  ): Promise<{ runId: RunId; callIds: CallId[] }> {
    const { store, state, scheduler } = this.#deps;
    validateCalls(request.calls);
    const { run, recorded: runRecorded, started, fresh } = await this.#run(principal, request);
    // Each submission is its own scheduling group (a "turn" keyed by time): its writes run one after another.
    const turn = this.#deps.now();
    // A host-driven run grows without bound: read only the results that can taint it, never the whole run.
    const untrusted = request.runId || request.pinnedBefore ? untrustedTools(this.#deps.contracts.registry()) : [];
    const taint = taintFrom(await store.succeededTools(run._id, untrusted));
    const minted = callRecords(this.#deps.contracts.registry(), run, turn, request.calls, taint, new Date(this.#deps.now()));
    const { records, ended, keysRecorded } = await this.#claimProviderIds(run, fresh, minted);
    const callIds = records.map((r) => r._id);
    beforePublish(callIds, ended);
    // A call this process already tracks is a retry of a submission whose proposal or record may have failed (an
    // outage): it is scheduled again (a proposal already published is not published twice) and its record ensured.
    const open = records.filter((r) => !ended.has(r._id)).map((r) => state.open(r._id) ?? { call: r, recorded: undefined });
    if (open.length > 0) {
      // The records are durable before the host learns the calls' ids: a process that dies after answering leaves
      // calls any replica can look up and attach outcomes to (an outcome is attached only to a recorded call).
      // Writes after the first wait for it to end, and whichever replica handles that outcome proposes the next
      // one: those records are in the store before anything runs, and the orphan sweep looks at them once (their
      // proposer may die first). Calls proposed at once are recorded once their proposals are in the stream, and
      // the sweep never reads them back; a call whose proposal did not land (an outage, a write waiting for a
      // lock) is recorded for the sweep instead. A caller that answers with outcomes lets the calls proposed at once
      // be recorded with their outcomes (a proposal in the stream is its call's record until then, with the locks
      // it holds), or on their own once in flight a while, or once the caller is about to answer without them.
      const unseen = open.filter((o) => o.recorded === undefined).map((o) => o.call);
      const deferred = open.filter((o) => o.call.write).length > 1;
      const later = options.answersWithOutcomes === true && !deferred;
      let proposalsLanded!: (landed: boolean) => void;
      const landed = new Promise<boolean>((resolve) => (proposalsLanded = resolve));
      const eager = later ? [] : unseen;
      const recorded =
        eager.length === 0
          ? Durable.done()
          : deferred
            ? Durable.start(() => store.insertCalls(eager))
            : Durable.start(async () => store.insertCalls(eager, { proposed: await landed }));
      const lazy = later ? unseen.map((call) => ({ call, recorded: Durable.lazy(async () => store.insertCalls([call], { proposed: await landed })) })) : [];
      const writes = [recorded, ...new Set(open.flatMap((o) => (o.recorded ? [o.recorded] : [])))];
      if (deferred) await Promise.all(writes.map((w) => w.ensure()));
      state.track(eager, true, recorded);
      for (const l of lazy) state.track([l.call], true, l.recorded);
      const calls = open.map((o) => o.call);
      const scheduled = scheduler.schedule(run, turn, calls, new Set());
      // A proposal that did not land leaves the sweep a record to go by, whatever becomes of this request.
      const notLanded = () => {
        proposalsLanded(false);
        for (const l of lazy) l.recorded.begin();
      };
      scheduled.then((blocked) => (blocked ? notLanded() : proposalsLanded(true)), notLanded);
      await Promise.all([started.ensure(), scheduled, ...writes.map((w) => w.ensure())]);
      if (lazy.length > 0) {
        if (await landed) this.#recordLater(lazy.map((l) => l.recorded));
        else await Promise.all(lazy.map((l) => l.recorded.ensure()));
      }
    } else await started.ensure();
    // A new run's record is durable before the host learns its id (any replica can then look it up). A failed
    // write is not the host's failure: its calls run, and their outcomes are attached only once it is written.
    const [runWritten, keysWritten] = await Promise.all([runRecorded.settled(), keysRecorded.settled()]);
    if (!runWritten) this.#deps.logger.warn({ run_id: run._id }, "run record not written yet; retried before its calls' outcomes are attached");
    if (!keysWritten) this.#deps.logger.warn({ run_id: run._id }, "provider call ids of a new run not recorded; a resubmission of them is not recognized");
    return { runId: run._id, callIds };
  }

  /**
   * Makes the records of these calls durable now, where the submission left them to be written later. Throws
   * (retryable) when the store is unreachable.
   */
  async ensureRecorded(callIds: readonly CallId[]): Promise<void> {
    await Promise.all(callIds.flatMap((id) => this.#deps.state.open(id)?.recorded.ensure() ?? []));
  }

  /** Starts the records of calls still in flight after the record delay (those that ended are cancelled). */
  #recordLater(records: readonly Durable[]): void {
    const begin = () => {
      for (const r of records) r.begin();
    };
    const delay = this.#deps.recordDelayMs ?? 0;
    if (delay === 0) return begin();
    setTimeout(begin, delay).unref();
  }

  /**
   * Claims the provider call ids of `minted` in `run`: the records to use (an earlier call's id where the same
   * provider id was claimed before), the outcomes of those that ended, and the write of a new run's keys. A run
   * created by this submission has no earlier calls: its keys are written alongside the proposals (durable
   * before the host learns the run's id); in any other run they are claimed before anything is proposed.
   */
  async #claimProviderIds(
    run: RunRecord,
    fresh: boolean,
    minted: CallRecord[],
  ): Promise<{ records: CallRecord[]; ended: Map<CallId, ResultEnvelope>; keysRecorded: Durable }> {
    const keys = minted.map(hostCallKey);
    const ended = new Map<CallId, ResultEnvelope>();
    if (fresh) return { records: minted, ended, keysRecorded: Durable.start(() => this.#keys.claim(keys)) };
    const claims = await this.#keys.claim(keys);
    const records = minted.map((record, i) => {
      const claim = claims[i]!;
      if (claim.kind === "claimed") return record;
      if (claim.kind === "unreadable") throw new HostCallConflictError(record.provider_call_id, undefined);
      if (claim.key.tool_name !== record.tool_name || claim.key.signature !== record.signature) {
        throw new HostCallConflictError(record.provider_call_id, claim.key.call_id);
      }
      return { ...record, _id: claim.key.call_id };
    });
    const earlier = records.filter((r, i) => claims[i]!.kind === "existing" && !this.#deps.state.open(r._id));
    const results = await Promise.all(earlier.map((r) => this.#deps.store.getResult(r._id)));
    for (const result of results) if (result) ended.set(result._id, result.result);
    return { records, ended, keysRecorded: Durable.done() };
  }

  /** The host's run: remembered, read once, or created (its record and start event alongside the proposals). */
  async #run(principal: Principal, request: HostSubmission): Promise<{ run: RunRecord; recorded: Durable; started: Durable; fresh: boolean }> {
    const { store, bus, state } = this.#deps;
    const owned = (run: RunRecord) => run.principal.tenant === principal.tenant && run.principal.subject === principal.subject;
    // A run pinned by a key's first request is new; one pinned before may exist (an earlier attempt made it).
    const runId = request.runId ?? (request.pinnedBefore ? request.pinnedRunId : undefined);
    if (runId) {
      const known = state.external(runId);
      // Its `started` may not have been published yet (an outage): ensured again, under the same event id.
      if (known && owned(known.run)) return { ...known, fresh: false };
      const existing = await store.getRun(runId);
      if (existing || !request.pinnedRunId) {
        if (!existing || !owned(existing)) throw new RunRequestError("RUN_NOT_FOUND", "no such run");
        if (existing.status !== "external") throw new RunRequestError("RUN_NOT_EXTERNAL", "this run is driven by Toolgate's own loop");
        const recorded = Durable.done();
        state.rememberExternal(existing, recorded);
        return { run: existing, recorded, started: Durable.done(), fresh: false };
      }
    }
    const minted = this.#deps.newRun(principal, request.context);
    const run = request.pinnedRunId ? { ...minted, _id: request.pinnedRunId } : minted;
    // Written alongside the proposals, not before them: the stream holds them, and the run's record is durable
    // before any of its calls' outcomes is attached (and before this request is answered).
    const recorded = Durable.start(() => store.insertRun(run));
    const started = Durable.start(() =>
      bus.publish(runEvent({ run_id: run._id, principal }, "started", "orchestrator", 0, { model: "external", context: request.context })),
    );
    state.rememberExternal(run, recorded, started);
    if (this.#deps.traces) recordHostRunSpan(this.#deps.traces, run);
    // A pinned run's calls' keys are claimed before anything is proposed, as in an existing run: an attempt that
    // takes the client's key over may be submitting the same calls into it at the same time.
    return { run, recorded, started, fresh: request.pinnedRunId === undefined };
  }
}
