import type { ClaimLedger, EventBus, EventHandler } from "@toolgate/bus";
import { newRunId, runEvent, type CallId, type Principal, type RunContext, type RunId, type ToolgateEvent } from "@toolgate/contracts";
import type { ModelAdapter, ProposedToolCall } from "@toolgate/models";
import type { ToolRegistry } from "@toolgate/registry";
import type { Logger, RunTraces } from "@toolgate/telemetry";
import type { Budgets } from "./budgets.js";
import { CallOutcomes } from "./call-outcomes.js";
import type { CallScheduler } from "./call-scheduler.js";
import type { CallWaiters } from "./call-waiters.js";
import { HostCalls, type SubmitOptions } from "./host-calls.js";
import { LoopState, ProgressWriter } from "./loop-state.js";
import type { OrchestratorMetrics } from "./metrics.js";
import { OrphanSweep } from "./orphan-sweep.js";
import { RunRequestError } from "./proposals.js";
import { RunEnds } from "./run-ends.js";
import { RunRecovery } from "./run-recovery.js";
import type { CallRecord, RunRecord, RunStore } from "./run-store.js";
import { TurnPlayer } from "./turn-player.js";

export { RunRequestError } from "./proposals.js";

export interface RunLoopDeps {
  store: RunStore;
  bus: EventBus;
  /** Where a host's provider call ids are claimed. */
  ledger: ClaimLedger;
  /** The contracts in force now (the catalog: new versions arrive while running). */
  contracts: { registry(): ToolRegistry };
  scheduler: CallScheduler;
  /** Resolves a model name (e.g. `scripted:c04`, `openai-responses:gpt-x`) to its adapter. */
  models: (name: string) => ModelAdapter | undefined;
  waiters: CallWaiters;
  /** Budgets of a run that does not ask for tighter ones. */
  defaultBudgets: Budgets;
  /** This process's identity in turn claims. */
  instanceId: string;
  logger: Logger;
  now?: () => number;
  /** Recorded-but-unproposed calls: how far back a process's first look goes, and how old a call must be. */
  orphans?: { lookbackMs: number; graceMs: number };
  /** How long a host's call proposed at once may run before it is recorded on its own (see `HostCalls`). */
  callRecordDelayMs?: number;
  /** Where calls' outcomes and runs' stops are counted. */
  metrics?: Pick<OrchestratorMetrics, "calls" | "runsStopped">;
  /** With spans: the run's, its turns' and its calls' spans (see `RunTraces`). */
  traces?: RunTraces | undefined;
}

/**
 * The tool loop (seed 001 §5): model request → response → final answer, refusal or tool calls → validate,
 * authorize, approve, execute (other services) → record → back to the model, within the run's budgets; and the
 * same scheduling for calls a host's own loop hands over. Its parts: {@link TurnPlayer} plays a managed run's
 * turns, {@link HostCalls} takes a host's calls, {@link CallOutcomes} acts on each call's end, {@link RunEnds}
 * ends runs once, {@link RunRecovery} sweeps budgets and resumes what a previous process left behind.
 */
export class RunLoop {
  readonly #deps: RunLoopDeps;
  readonly #now: () => number;
  readonly #state = new LoopState();
  readonly #player: TurnPlayer;
  readonly #ends: RunEnds;
  readonly #host: HostCalls;
  readonly #outcomes: CallOutcomes;
  readonly #recovery: RunRecovery;

  constructor(deps: RunLoopDeps) {
    this.#deps = deps;
    const now = (this.#now = deps.now ?? Date.now);
    const { store, bus, contracts, scheduler, logger, instanceId } = deps;
    const state = this.#state;
    const progress = new ProgressWriter(store, logger);
    this.#ends = new RunEnds({
      store,
      bus,
      state,
      progress,
      instanceId,
      logger,
      traces: deps.traces,
      ...(deps.metrics ? { stopped: deps.metrics.runsStopped } : {}),
    });
    this.#player = new TurnPlayer({
      store,
      bus,
      contracts,
      scheduler,
      models: deps.models,
      state,
      progress,
      ends: this.#ends,
      instanceId,
      logger,
      now,
      traces: deps.traces,
    });
    this.#host = new HostCalls({
      store,
      bus,
      ledger: deps.ledger,
      contracts,
      scheduler,
      state,
      newRun: (principal, context) => this.#newRun(principal, "external", "", context, "external"),
      logger,
      now,
      recordDelayMs: deps.callRecordDelayMs ?? 1_000,
      traces: deps.traces,
    });
    this.#outcomes = new CallOutcomes({
      store,
      bus,
      contracts,
      scheduler,
      waiters: deps.waiters,
      state,
      player: this.#player,
      logger,
      now,
      ...(deps.metrics ? { calls: deps.metrics.calls } : {}),
    });
    // An outcome attached by the sweep goes through the terminal consumer's own handler, as a first delivery (the
    // sweep reads it back with `lastEvent`, which passes on only events their owner signed).
    const attach = (event: ToolgateEvent) =>
      this.#outcomes.onTerminal(event, {
        subject: "",
        streamSeq: 0,
        deliveryCount: 1,
        maxDeliver: 1,
        working: () => undefined,
        signature: { header: undefined, digest: "" },
      });
    const orphans = new OrphanSweep({
      store,
      scheduler,
      bus,
      logger,
      now,
      batch: 1_000,
      attach,
      ...(deps.orphans ?? { lookbackMs: 3_600_000, graceMs: 5_000 }),
    });
    this.#recovery = new RunRecovery({ store, scheduler, state, player: this.#player, ends: this.#ends, orphans, logger, now });
  }

  /** Consumes terminal call events: see {@link CallOutcomes}. */
  get onTerminal(): EventHandler {
    return this.#outcomes.onTerminal;
  }

  /** Consumes `approval_requested` events, for the approval-wait budget. */
  get onApprovalRequested(): EventHandler {
    return this.#outcomes.onApprovalRequested;
  }

  /**
   * Creates a managed run and plays its first model turn in the background. The run's record, its first turn's
   * claim and its start event are written at once, each without waiting for the others.
   */
  async startRun(principal: Principal, model: string, input: string, context: RunContext, budgets: Partial<Budgets> = {}): Promise<RunId> {
    if (!this.#deps.models(model)) throw new RunRequestError("UNKNOWN_MODEL", `no model adapter named ${model}`);
    const run = this.#newRun(principal, model, input, context, "running", budgets);
    const { store, bus, instanceId } = this.#deps;
    await Promise.all([
      store.insertRun(run),
      store.claimTurn(run._id, 0, instanceId),
      bus.publish(runEvent({ run_id: run._id, principal }, "started", "orchestrator", 0, { model, context, input })),
    ]);
    const active = { run, results: new Map(), calls: [] };
    this.#state.activate(active);
    this.#player.background(active);
    return run._id;
  }

  /**
   * Bring-your-own-loop: the host ran the model; Toolgate validates, authorizes and executes its tool calls
   * with the same scheduling as its own loop. Returns the runtime call id of each call, in order.
   */
  submitCalls(
    principal: Principal,
    request: { runId?: RunId; context: RunContext; calls: ProposedToolCall[] },
    beforePublish?: (callIds: CallId[]) => void,
    options?: SubmitOptions,
  ): Promise<{ runId: RunId; callIds: CallId[] }> {
    return this.#host.submit(principal, request, beforePublish, options);
  }

  /** Makes the records of these calls durable now, where they were left to be written later (see `SubmitOptions`). */
  ensureRecorded(callIds: readonly CallId[]): Promise<void> {
    return this.#host.ensureRecorded(callIds);
  }

  /**
   * Stops a managed run at its owner's request (`cancelled`). Calls already executing finish (their side
   * effects are at most once either way); calls waiting for approval are withdrawn by policy, which consumes
   * the stop; nothing new is proposed. False when the run had already ended.
   */
  async cancelRun(principal: Principal, runId: RunId): Promise<boolean> {
    const run = await this.#deps.store.getRun(runId);
    if (!run || run.principal.tenant !== principal.tenant || run.principal.subject !== principal.subject) {
      throw new RunRequestError("RUN_NOT_FOUND", "no such run");
    }
    if (run.status === "external") throw new RunRequestError("RUN_IS_EXTERNAL", "a host-driven run has no loop to cancel");
    if (run.status !== "running") return false;
    return this.#ends.stop(this.#state.active(runId)?.run ?? run, "cancelled", `cancelled by ${principal.tenant}/${principal.subject}`);
  }

  /** A call by id, wherever it is known (see {@link CallOutcomes.findCall}). */
  findCall(callId: CallId): Promise<CallRecord | undefined> {
    return this.#outcomes.findCall(callId);
  }

  /** The calls of `runId` this process proposed whose records wait to be written with their outcomes. */
  unrecordedCalls(runId: RunId): CallRecord[] {
    return this.#outcomes.unrecordedCalls(runId);
  }

  /** Periodic checks (see {@link RunRecovery.sweep}). */
  sweep(full = false, orphans = full): Promise<void> {
    return this.#recovery.sweep(full, orphans);
  }

  /** Picks up runs a previous process left behind (see {@link RunRecovery.resume}). */
  resume(): Promise<number> {
    return this.#recovery.resume();
  }

  #newRun(principal: Principal, model: string, input: string, context: RunContext, status: RunRecord["status"], budgets: Partial<Budgets> = {}): RunRecord {
    const now = new Date(this.#now());
    // A run may tighten the server's budgets, never loosen them.
    const merged = Object.fromEntries(Object.entries(this.#deps.defaultBudgets).map(([k, v]) => [k, Math.min(v, budgets[k as keyof Budgets] ?? v)])) as Budgets;
    return {
      _id: newRunId(),
      principal,
      model,
      context,
      input,
      status,
      turn: 0,
      awaiting: status === "external" ? "nothing" : "model",
      responses: [],
      tool_calls: 0,
      budgets: merged,
      usage: { turns: 0, tool_calls: 0, tokens: 0, signatures: {} },
      created_at: now,
      updated_at: now,
    };
  }
}
