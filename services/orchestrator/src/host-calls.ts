import type { EventBus } from "@toolgate/bus";
import { runEvent, type CallId, type Principal, type RunContext, type RunId } from "@toolgate/contracts";
import type { ProposedToolCall } from "@toolgate/models";
import type { ToolRegistry } from "@toolgate/registry";
import type { Logger } from "@toolgate/telemetry";
import type { CallScheduler } from "./call-scheduler.js";
import { Durable } from "./durable.js";
import type { LoopState } from "./loop-state.js";
import { callRecords, RunRequestError, taintFrom, untrustedTools, validateCalls } from "./proposals.js";
import type { RunRecord, RunStore } from "./run-store.js";

export interface HostCallsDeps {
  store: RunStore;
  bus: EventBus;
  contracts: { registry(): ToolRegistry };
  scheduler: CallScheduler;
  state: LoopState;
  /** A new host-driven run for `principal` (not yet stored). */
  newRun: (principal: Principal, context: RunContext) => RunRecord;
  logger: Logger;
  now: () => number;
}

/**
 * Bring-your-own-loop: the host ran the model; its tool calls are validated, authorized and executed with
 * the same scheduling as Toolgate's own loop. A call waits for no write of the orchestrator's: its proposal is
 * published at once and its record is written alongside.
 */
export class HostCalls {
  readonly #deps: HostCallsDeps;

  constructor(deps: HostCallsDeps) {
    this.#deps = deps;
  }

  /** Proposes the host's calls in its run (a new one without `runId`); the runtime call id of each, in order. */
  async submit(
    principal: Principal,
    request: { runId?: RunId; context: RunContext; calls: ProposedToolCall[] },
    beforePublish: (callIds: CallId[]) => void = () => undefined,
  ): Promise<{ runId: RunId; callIds: CallId[] }> {
    const { store, state, scheduler } = this.#deps;
    validateCalls(request.calls);
    const { run, recorded: runRecorded, started } = await this.#run(principal, request);
    // Each submission is its own scheduling group (a "turn" keyed by time): its writes run one after another.
    const turn = this.#deps.now();
    // A host-driven run grows without bound: read only the results that can taint it, never the whole run.
    const untrusted = request.runId ? untrustedTools(this.#deps.contracts.registry()) : [];
    const taint = taintFrom(await store.succeededTools(run._id, untrusted));
    const records = callRecords(this.#deps.contracts.registry(), run, turn, request.calls, taint, new Date(this.#deps.now()));
    beforePublish(records.map((r) => r._id));
    // The records are written alongside the proposals, not before them: no call waits for them, and they are in
    // the store long before an outcome needs them (an outcome is attached only to a recorded call). Writes after
    // the first wait for it to end, and whichever replica handles that outcome proposes the next one: those
    // records must be in the store before anything runs.
    const recorded = Durable.start(() => store.insertCalls(records));
    if (records.filter((r) => r.write).length > 1) await recorded.ensure();
    state.track(records, true, recorded);
    await Promise.all([started, scheduler.schedule(run, turn, records, new Set())]);
    // A new run's record is durable before the host learns its id (any replica can then look it up). A failed
    // write is not the host's failure: its calls run, and their outcomes are attached only once it is written.
    if (!(await runRecorded.settled()))
      this.#deps.logger.warn({ run_id: run._id }, "run record not written yet; retried before its calls' outcomes are attached");
    return { runId: run._id, callIds: records.map((r) => r._id) };
  }

  /** The host's run: remembered, read once, or created (its record and start event alongside the proposals). */
  async #run(principal: Principal, request: { runId?: RunId; context: RunContext }): Promise<{ run: RunRecord; recorded: Durable; started: Promise<unknown> }> {
    const { store, bus, state } = this.#deps;
    const owned = (run: RunRecord) => run.principal.tenant === principal.tenant && run.principal.subject === principal.subject;
    if (request.runId) {
      const known = state.external(request.runId);
      if (known && owned(known.run)) return { ...known, started: Promise.resolve() };
      const existing = await store.getRun(request.runId);
      if (!existing || !owned(existing)) throw new RunRequestError("RUN_NOT_FOUND", "no such run");
      if (existing.status !== "external") throw new RunRequestError("RUN_NOT_EXTERNAL", "this run is driven by Toolgate's own loop");
      const recorded = Durable.done();
      state.rememberExternal(existing, recorded);
      return { run: existing, recorded, started: Promise.resolve() };
    }
    const run = this.#deps.newRun(principal, request.context);
    // Written alongside the proposals, not before them: the stream holds them, and the run's record is durable
    // before any of its calls' outcomes is attached (and before this request is answered).
    const recorded = Durable.start(() => store.insertRun(run));
    state.rememberExternal(run, recorded);
    const started = bus.publish(runEvent({ run_id: run._id, principal }, "started", "orchestrator", 0, { model: "external", context: request.context }));
    return { run, recorded, started };
  }
}
