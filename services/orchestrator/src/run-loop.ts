import { ACK, terminate, type Disposition, type EventBus, type EventHandler } from "@toolgate/bus";
import {
  MAX_ARGUMENTS_JSON_BYTES,
  newCallId,
  newRunId,
  nextCallEvent,
  originOf,
  runEvent,
  type CallEvent,
  type CallId,
  type Principal,
  type RunContext,
  type RunId,
  type ToolgateEvent,
} from "@toolgate/contracts";
import type { ToolRegistry } from "@toolgate/registry";
import type { Logger } from "@toolgate/telemetry";
import { checkTurn, type Budgets, type StopReason } from "./budgets.js";
import { callTraits, type CallScheduler } from "./call-scheduler.js";
import type { CallWaiters } from "./call-waiters.js";
import type { ModelAdapter, ModelResponse, ProposedToolCall } from "@toolgate/models";
import type { CallRecord, CallResultRecord, RunEnd, RunRecord, RunStore } from "./run-store.js";
import { Durable } from "./durable.js";
import { transcriptOf } from "./transcript.js";

export interface RunLoopDeps {
  store: RunStore;
  bus: EventBus;
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
}

/** A request the run loop refuses; the API maps it to a 4xx with this code. */
export class RunRequestError extends Error {
  constructor(
    readonly code: "UNKNOWN_MODEL" | "RUN_NOT_FOUND" | "RUN_NOT_EXTERNAL" | "RUN_IS_EXTERNAL" | "INVALID_CALLS",
    message: string,
  ) {
    super(message);
    this.name = "RunRequestError";
  }
}

type TerminalEvent = Extract<CallEvent, { type: "rejected" | "denied" | "completed" | "outcome_unknown" }>;

const MAX_CACHED = 100_000;
/** How long a host call's record waits to be written together with its outcome before it is written alone. */
const RECORD_DELAY_MS = 250;

/**
 * The tool loop (seed 001 §5): model request → response → final answer, refusal or tool calls → validate,
 * authorize, approve, execute (other services) → record → back to the model, within the run's budgets.
 * A turn is played by whoever inserts its claim first, so handlers and replicas never double-advance a
 * run; everything is persisted, so a restarted orchestrator resumes where the last one stopped.
 */
export class RunLoop {
  readonly #deps: RunLoopDeps;
  readonly #now: () => number;
  /**
   * Calls this process proposed that have no outcome yet, with the write that stores their record: saves a
   * read per terminal event, and lets the record be written behind the proposal (JetStream holds the proposal).
   */
  readonly #open = new Map<CallId, { call: CallRecord; external: boolean; recorded: Durable }>();
  /** Open writes per `<run>:<turn>` among the calls this process proposed. */
  readonly #openWrites = new Map<string, number>();
  /** Host-driven runs this process created or checked: their owner and status never change. */
  readonly #externalRuns = new Map<RunId, { run: RunRecord; recorded: Durable }>();
  /** Managed runs this process has seen running, for the wall-clock and approval-wait sweeps. */
  readonly #running = new Set<RunId>();

  constructor(deps: RunLoopDeps) {
    this.#deps = deps;
    this.#now = deps.now ?? Date.now;
  }

  /** Creates a managed run and plays its first model turn in the background. */
  async startRun(principal: Principal, model: string, input: string, context: RunContext, budgets: Partial<Budgets> = {}): Promise<RunId> {
    if (!this.#deps.models(model)) throw new RunRequestError("UNKNOWN_MODEL", `no model adapter named ${model}`);
    const run = this.#newRun(principal, model, input, context, "running", budgets);
    await this.#deps.store.insertRun(run);
    await this.#deps.store.claimTurn(run._id, 0, this.#deps.instanceId);
    this.#running.add(run._id);
    await this.#deps.bus.publish(runEvent({ run_id: run._id, principal }, "started", "orchestrator", 0, { model, context }));
    this.#background(this.#playModelTurn(run), run._id);
    return run._id;
  }

  /**
   * Bring-your-own-loop: the host ran the model; Toolgate validates, authorizes and executes its tool calls
   * with the same scheduling as its own loop. Returns the runtime call id of each call, in order.
   */
  async submitCalls(
    principal: Principal,
    request: { runId?: RunId; context: RunContext; calls: ProposedToolCall[] },
    beforePublish: (callIds: CallId[]) => void = () => undefined,
  ): Promise<{ runId: RunId; callIds: CallId[] }> {
    validateCalls(request.calls);
    let run: RunRecord;
    let runRecorded: Durable;
    let runStarted: Promise<unknown> = Promise.resolve();
    const known = request.runId ? this.#externalRuns.get(request.runId) : undefined;
    if (known && known.run.principal.tenant === principal.tenant && known.run.principal.subject === principal.subject) {
      ({ run, recorded: runRecorded } = known);
    } else if (request.runId) {
      const existing = await this.#deps.store.getRun(request.runId);
      if (!existing || existing.principal.tenant !== principal.tenant || existing.principal.subject !== principal.subject) {
        throw new RunRequestError("RUN_NOT_FOUND", "no such run");
      }
      if (existing.status !== "external") throw new RunRequestError("RUN_NOT_EXTERNAL", "this run is driven by Toolgate's own loop");
      run = existing;
      runRecorded = Durable.done();
      this.#remember(this.#externalRuns, run._id, { run, recorded: runRecorded });
    } else {
      run = this.#newRun(principal, "external", "", request.context, "external");
      const created = run;
      // Written alongside the proposals, not before them: the stream holds them, and the run's record is
      // durable before any of its calls' outcomes is attached (and before this request is answered).
      runRecorded = Durable.start(() => this.#deps.store.insertRun(created));
      this.#remember(this.#externalRuns, run._id, { run, recorded: runRecorded });
      runStarted = this.#deps.bus.publish(
        runEvent({ run_id: run._id, principal }, "started", "orchestrator", 0, { model: "external", context: request.context }),
      );
    }
    // Each submission is its own scheduling group (a "turn" keyed by time): its writes run one after another.
    const turn = this.#now();
    // A host-driven run grows without bound: read only the results that can taint it, never the whole run.
    const untrusted = request.runId ? untrustedTools(this.#deps.contracts.registry()) : [];
    const taint = taintFrom(await this.#deps.store.succeededTools(run._id, untrusted));
    const records = this.#callRecords(run, turn, request.calls, taint);
    beforePublish(records.map((r) => r._id));
    // Writes after the first wait for it to end, and whichever replica handles that outcome proposes the next
    // one: those records must be in the store before anything runs. Otherwise the proposals in the stream are
    // the record for now, and each call's own is written with its outcome (or after a while, if it runs long).
    const holdsBack = records.filter((r) => r.write).length > 1;
    const recorded = holdsBack
      ? Durable.start(() => this.#deps.store.insertCalls(records))
      : Durable.later(() => this.#deps.store.insertCalls(records), RECORD_DELAY_MS);
    if (holdsBack) await recorded.ensure();
    this.#track(records, true, recorded);
    await Promise.all([runStarted, this.#deps.scheduler.schedule(run, turn, records, true)]);
    // A new run's record is durable before the host learns its id (any replica can then look it up). A failed
    // write is not the host's failure: its calls run, and their outcomes are attached only once it is written.
    if (!(await runRecorded.settled()))
      this.#deps.logger.warn({ run_id: run._id }, "run record not written yet; retried before its calls' outcomes are attached");
    return { runId: run._id, callIds: records.map((r) => r._id) };
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
    return this.#stop(run, "cancelled", `cancelled by ${principal.tenant}/${principal.subject}`);
  }

  /**
   * Consumes terminal call events: answer whoever waits for the call at once, then attach the outcome
   * (durably, before the event is acknowledged), release, schedule the next write, advance the run.
   */
  readonly onTerminal: EventHandler = async (event: ToolgateEvent): Promise<Disposition> => {
    if (event.kind !== "call" || !isTerminal(event)) return terminate(`orchestrator does not handle ${event.kind}.${event.type}`);
    const open = this.#open.get(event.call_id);
    const result = event.payload.result;
    // The outcome is in the stream already; the attach below only records it for the run — unless the result
    // taints the run (untrusted content): the host must not be able to propose its next call, on any replica,
    // before that taint can be read back (Rule of Two).
    const answerFirst = open !== undefined && !(result.ok && this.#deps.contracts.registry().get(open.call.tool_name)?.contract.untrusted_output === true);
    if (answerFirst) this.#deps.waiters.resolve(event.call_id, result);
    // The call's own record, if it waited for this outcome, goes to the store alongside it.
    const recorded = open?.recorded.ensure();
    const call = open?.call ?? (await this.#recoverCall(event.call_id));
    if (!call) {
      this.#deps.logger.warn({ call_id: event.call_id, type: event.type }, "terminal event for a call this orchestrator never proposed");
      return ACK;
    }
    const [attached] = await Promise.all([
      this.#deps.store.attachResult({
        _id: call._id,
        run_id: call.run_id,
        turn: call.turn,
        provider_call_id: call.provider_call_id,
        tool_name: call.tool_name,
        terminal: event.type,
        result,
        ...(event.type === "completed" || event.type === "outcome_unknown" ? { duration_ms: event.payload.duration_ms } : {}),
        attached_at: new Date(),
      }),
      recorded,
    ]);
    if (attached === "duplicate") {
      const first = await this.#deps.store.getResult(call._id);
      if (first && first.terminal !== event.type)
        this.#deps.logger.error({ call_id: call._id, first: first.terminal, second: event.type }, "second terminal event for one call ignored");
    }
    // Always (a redelivery may follow a crash right after the attach): releasing twice is a no-op.
    await this.#deps.scheduler.finished(call);
    if (!answerFirst) this.#deps.waiters.resolve(call._id, result);
    await this.#deps.bus.publish(nextCallEvent(originOf(event), "result_attached", "orchestrator", { provider_call_id: call.provider_call_id, ok: result.ok }));
    this.#untrack(call);
    const external = open?.external ? this.#externalRuns.get(call.run_id) : undefined;
    if (external) await external.recorded.ensure();
    const run = external?.run ?? (await this.#deps.store.getRun(call.run_id));
    if (!run) return ACK;
    if (run.status === "external") {
      // Only a write can be waiting for an earlier call of its group to end.
      if (open === undefined || this.#writesPending(call)) await this.#deps.scheduler.schedule(run, call.turn);
      return ACK;
    }
    await this.#afterResult(run, call);
    return ACK;
  };

  /**
   * A call by id: one this process proposed, a stored one, or — proposed by a replica that has not written its
   * record yet — rebuilt from its proposal in the stream. Undefined when Toolgate never proposed such a call.
   */
  async findCall(callId: CallId): Promise<CallRecord | undefined> {
    return this.#open.get(callId)?.call ?? (await this.#deps.store.getCall(callId)) ?? (await this.#proposedCall(callId));
  }

  /** The calls of `runId` this process proposed whose records wait to be written with their outcomes. */
  unrecordedCalls(runId: RunId): CallRecord[] {
    return [...this.#open.values()].filter((o) => o.call.run_id === runId).map((o) => o.call);
  }

  /**
   * The record of a call whose outcome arrived at a process that did not propose it (or proposed it and
   * restarted): from the store, or — when the proposer died before writing it — rebuilt from its proposal in
   * the stream and written now. Undefined when Toolgate never proposed such a call.
   */
  async #recoverCall(callId: CallId): Promise<CallRecord | undefined> {
    const stored = await this.#deps.store.getCall(callId);
    if (stored) return stored;
    const call = await this.#proposedCall(callId);
    if (!call) return undefined;
    this.#deps.logger.warn({ call_id: callId, run_id: call.run_id }, "call record rebuilt from its proposal in the stream");
    await this.#deps.store.insertCalls([call]);
    return call;
  }

  /** A call as its proposal in the stream describes it. */
  async #proposedCall(callId: CallId): Promise<CallRecord | undefined> {
    const proposal = await this.#deps.bus.lastEvent("call", callId, "proposed");
    if (proposal?.kind !== "call" || proposal.type !== "proposed" || proposal.source !== "orchestrator") return undefined;
    const { payload } = proposal;
    return {
      _id: callId,
      run_id: proposal.run_id,
      turn: payload.turn,
      provider_call_id: payload.provider_call_id,
      tool_name: payload.tool_name,
      arguments_json: payload.arguments_json,
      // Its place among the calls of its turn: only the proposer kept it, and it matters only while writes wait.
      order: 0,
      ...callTraits(this.#deps.contracts.registry(), payload.tool_name, payload.arguments_json),
      taint: payload.taint ?? { tainted: false, sources: [] },
      created_at: new Date(proposal.time),
    };
  }

  /** Consumes `approval_requested`: remembers since when a call waits, for the approval-wait budget. */
  readonly onApprovalRequested: EventHandler = async (event: ToolgateEvent): Promise<Disposition> => {
    if (event.kind !== "call" || event.type !== "approval_requested") return terminate(`unexpected ${event.kind}.${event.type}`);
    await this.#deps.store.recordApprovalWait({
      _id: event.call_id,
      run_id: event.run_id,
      approval_id: event.payload.approval_id,
      since: new Date(event.time),
      expires_at: new Date(event.payload.expires_at),
    });
    this.#running.add(event.run_id);
    return ACK;
  };

  /**
   * Periodic checks: runs past their wall clock or with a call waiting for approval too long are stopped;
   * writes waiting for a resource lock are retried. `full` also looks at runs other processes started.
   */
  async sweep(full = false): Promise<void> {
    if (full) for (const run of await this.#deps.store.runs.find({ status: "running" }, { projection: { _id: 1 } }).toArray()) this.#running.add(run._id);
    for (const [runId, turn] of [...this.#deps.scheduler.blocked]) {
      const run = (await this.#deps.store.getRun(runId)) ?? undefined;
      if (run && (run.status === "running" || run.status === "external")) await this.#deps.scheduler.schedule(run, turn);
      else this.#deps.scheduler.blocked.delete(runId);
    }
    for (const runId of [...this.#running]) {
      const run = await this.#deps.store.getRun(runId);
      if (!run || run.status !== "running") {
        this.#running.delete(runId);
        continue;
      }
      if (this.#now() - run.created_at.getTime() > run.budgets.max_wall_clock_ms) {
        await this.#stop(run, "budget_wall_clock", `the run exceeded its wall-clock budget of ${run.budgets.max_wall_clock_ms} ms`);
        continue;
      }
      const overdue = (await this.#deps.store.pendingApprovals(run._id)).find((w) => this.#now() - w.since.getTime() > run.budgets.max_approval_wait_ms);
      if (overdue) await this.#stop(run, "approval_timeout", `call ${overdue._id} waited more than ${run.budgets.max_approval_wait_ms} ms for approval`);
    }
  }

  /**
   * Picks up runs a previous process left behind: plays turns that were claimed but never answered, and
   * re-schedules turns whose calls are still open (proposals are idempotent; finished calls are not re-run).
   */
  async resume(): Promise<number> {
    const runs = await this.#deps.store.runs.find({ status: "running" }).toArray();
    for (const run of runs) {
      // Ended, but the process that ended it died before the run document or the end event said so.
      const end = await this.#deps.store.endOf(run._id);
      if (end) {
        await this.#deps.store.mirrorEnd(run._id, end);
        await this.#publishEnd(run, end);
        continue;
      }
      this.#running.add(run._id);
      if (run.awaiting === "model") {
        this.#background(this.#playModelTurn(run), run._id);
      } else if (run.awaiting === "tools") {
        const calls = await this.#deps.store.callsOfTurn(run._id, run.turn);
        this.#track(calls, false, Durable.done());
        this.#background(
          this.#deps.scheduler.schedule(run, run.turn, calls).then(() => this.#advanceIfTurnComplete(run)),
          run._id,
        );
      }
    }
    return runs.length;
  }

  async #afterResult(run: RunRecord, call: CallRecord): Promise<void> {
    if (run.status !== "running" || run.awaiting !== "tools" || run.turn !== call.turn) return;
    await this.#deps.scheduler.schedule(run, run.turn);
    await this.#advanceIfTurnComplete(run);
  }

  async #advanceIfTurnComplete(run: RunRecord): Promise<void> {
    if (run.status !== "running" || run.awaiting !== "tools") return;
    const expected = run.responses.find((r) => r.turn === run.turn)?.call_ids.length ?? 0;
    if ((await this.#deps.store.countResults(run._id, run.turn)) < expected) return;
    // Several handlers (and replicas) can see the turn complete at once; one claim wins.
    if (!(await this.#deps.store.claimTurn(run._id, run.turn + 1, this.#deps.instanceId))) return;
    const advanced: RunRecord = { ...run, turn: run.turn + 1, awaiting: "model", updated_at: new Date() };
    if (await this.#deps.store.recordProgress(run._id, { turn: advanced.turn, awaiting: "model" })) return this.#ended(run._id);
    await this.#playModelTurn(advanced);
  }

  async #playModelTurn(run: RunRecord): Promise<void> {
    const { store } = this.#deps;
    const registry = this.#deps.contracts.registry();
    // A turn recorded before a crash is continued, not asked again.
    const recorded = await store.getTurn(run._id, run.turn);
    if (recorded) {
      await this.#continueTurn(run, recorded.response, recorded.calls, recorded.tokens);
      return;
    }
    if (run.turn >= run.budgets.max_turns) {
      await this.#stop(run, "budget_turns", `the run reached its limit of ${run.budgets.max_turns} model turns`);
      return;
    }
    if (this.#now() - run.created_at.getTime() > run.budgets.max_wall_clock_ms) {
      await this.#stop(run, "budget_wall_clock", `the run exceeded its wall-clock budget of ${run.budgets.max_wall_clock_ms} ms`);
      return;
    }
    const model = this.#deps.models(run.model);
    if (!model) {
      await this.#stop(run, "model_error", `no model adapter named ${run.model}`);
      return;
    }
    let response: ModelResponse;
    const results = await store.resultsOf(run._id);
    try {
      response = await model.respond(transcriptOf(run, results, registry));
    } catch (error) {
      this.#deps.logger.warn({ err: error, run_id: run._id }, "model request failed");
      await this.#stop(run, "model_error", "the model request failed");
      return;
    }
    const tokens = response.tokens ?? 0;
    let records: CallRecord[] = [];
    if (response.kind === "tool_calls" && response.calls.length > 0) {
      try {
        validateCalls(response.calls);
        records = this.#callRecords(run, run.turn, response.calls, taintOf(results, registry));
      } catch (error) {
        await this.#stop(run, "model_error", (error as Error).message);
        return;
      }
      const breach = checkTurn(run.budgets, run.usage, { calls: records.map((r) => r.signature), tokens }, this.#now() - run.created_at.getTime());
      if (breach) {
        await this.#stop(run, breach.reason, breach.message);
        return;
      }
    } else if (run.usage.tokens + tokens > run.budgets.max_tokens) {
      await this.#stop(run, "budget_tokens", `the run exceeded its budget of ${run.budgets.max_tokens} tokens`);
      return;
    }
    // First recorder wins: if another process answered this turn meanwhile, its calls are the ones that run.
    if (!(await store.recordTurn({ _id: `${run._id}:${run.turn}`, run_id: run._id, turn: run.turn, response, calls: records, tokens, at: new Date() }))) return;
    await this.#continueTurn(run, response, records, tokens);
  }

  /** Persists and acts on a recorded response: propose its calls, or finish the run. Safe to repeat. */
  async #continueTurn(run: RunRecord, response: ModelResponse, records: CallRecord[], tokens: number): Promise<void> {
    const { store, bus } = this.#deps;
    const principal = run.principal;
    if (records.length > 0) {
      const signatures = { ...run.usage.signatures };
      for (const r of records) signatures[r.signature] = (signatures[r.signature] ?? 0) + 1;
      const usage = { turns: run.turn + 1, tool_calls: run.usage.tool_calls + records.length, tokens: run.usage.tokens + tokens, signatures };
      const responses = [...run.responses.filter((r) => r.turn !== run.turn), { turn: run.turn, response, call_ids: records.map((r) => r._id) }];
      await store.insertCalls(records);
      // A run that ended meanwhile (a stop by a sweep or another replica) proposes nothing more.
      if (await store.recordProgress(run._id, { responses, usage, tool_calls: usage.tool_calls, awaiting: "tools" })) return this.#ended(run._id);
      await bus.publish(
        runEvent({ run_id: run._id, principal }, "model_responded", "orchestrator", run.turn, {
          turn: run.turn,
          outcome: "tool_calls",
          tool_calls: records.length,
        }),
      );
      this.#track(records, false, Durable.done());
      const updated: RunRecord = { ...run, responses, usage, tool_calls: usage.tool_calls, awaiting: "tools" };
      await this.#deps.scheduler.schedule(updated, run.turn, records, true);
      await this.#advanceIfTurnComplete(updated);
      return;
    }
    if (response.kind === "refusal") {
      await this.#stop(run, "refusal", response.text.slice(0, 2048));
      return;
    }
    const text = response.kind === "final" ? response.text : (response.text ?? "");
    const end: RunEnd = {
      status: "completed",
      turn: run.turn,
      final_text: text,
      responses: [...run.responses.filter((r) => r.turn !== run.turn), { turn: run.turn, response, call_ids: [] }],
      usage: { ...run.usage, turns: run.turn + 1, tokens: run.usage.tokens + tokens },
      tool_calls: run.tool_calls,
    };
    // A stop that got there first (a budget swept meanwhile) stands; this answer then ends nothing.
    if (!(await store.endRun(run._id, this.#deps.instanceId, end))) return this.#endedElsewhere(run._id);
    this.#running.delete(run._id);
    await bus.publish(
      runEvent({ run_id: run._id, principal }, "model_responded", "orchestrator", run.turn, { turn: run.turn, outcome: "final", tool_calls: 0 }),
    );
    await this.#publishEnd(run, end);
  }

  /** Ends the run as stopped; false when another end (a completion, another stop) got there first. */
  async #stop(run: RunRecord, reason: StopReason, message: string): Promise<boolean> {
    // One end per run, whichever process, sweep or answer gets there first.
    const end: RunEnd = { status: "stopped", turn: run.turn, final_text: message, stop_reason: reason, tool_calls: run.tool_calls };
    if (!(await this.#deps.store.endRun(run._id, this.#deps.instanceId, end))) {
      await this.#endedElsewhere(run._id);
      return false;
    }
    this.#running.delete(run._id);
    this.#deps.logger.info({ run_id: run._id, reason }, "run stopped");
    await this.#publishEnd(run, end);
    return true;
  }

  /** Publishes a run's end event; its id is fixed by the run and turn, so publishing again is harmless. */
  async #publishEnd(run: Pick<RunRecord, "_id" | "principal">, end: RunEnd): Promise<void> {
    const origin = { run_id: run._id, principal: run.principal };
    await this.#deps.bus.publish(
      end.status === "completed"
        ? runEvent(origin, "completed", "orchestrator", end.turn, {
            turns: end.turn + 1,
            tool_calls: end.tool_calls,
            final_text: end.final_text.slice(0, 64 * 1024),
          })
        : runEvent(origin, "stopped", "orchestrator", end.turn, { reason: end.stop_reason, message: end.final_text }),
    );
  }

  /** Another step (or process) ended the run: this process stops watching it. */
  #ended(runId: RunId): void {
    this.#running.delete(runId);
  }

  /**
   * Ending the run lost to an earlier end. The run document was read as running, so it may have lost that
   * end to a concurrent progress write (or its writer crashed): make it say so again.
   */
  async #endedElsewhere(runId: RunId): Promise<void> {
    this.#ended(runId);
    const end = await this.#deps.store.endOf(runId);
    if (end) await this.#deps.store.mirrorEnd(runId, end);
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

  #callRecords(run: RunRecord, turn: number, calls: ProposedToolCall[], taint: CallRecord["taint"]): CallRecord[] {
    const now = new Date(this.#now());
    return calls.map((c, order) => ({
      _id: newCallId(),
      run_id: run._id,
      turn,
      provider_call_id: c.id,
      tool_name: c.name,
      arguments_json: c.arguments,
      order,
      ...callTraits(this.#deps.contracts.registry(), c.name, c.arguments),
      taint,
      created_at: now,
    }));
  }

  /** Whether a write of `call`'s run and turn that this process proposed is still open. */
  #writesPending(call: CallRecord): boolean {
    return (this.#openWrites.get(`${call.run_id}:${call.turn}`) ?? 0) > 0;
  }

  #track(records: readonly CallRecord[], external: boolean, recorded: Durable): void {
    for (const call of records) {
      if (!this.#open.has(call._id) && call.write)
        this.#openWrites.set(`${call.run_id}:${call.turn}`, (this.#openWrites.get(`${call.run_id}:${call.turn}`) ?? 0) + 1);
      this.#remember(this.#open, call._id, { call, external, recorded });
    }
  }

  #untrack(call: CallRecord): void {
    if (!this.#open.delete(call._id) || !call.write) return;
    const key = `${call.run_id}:${call.turn}`;
    const left = (this.#openWrites.get(key) ?? 1) - 1;
    if (left > 0) this.#openWrites.set(key, left);
    else this.#openWrites.delete(key);
  }

  /** Oldest first out: a call or run another replica finished is only a cache miss, never wrong. */
  #remember<K, V>(map: Map<K, V>, key: K, value: V): void {
    if (map.size >= MAX_CACHED) map.delete(map.keys().next().value!);
    map.set(key, value);
  }

  #background(work: Promise<unknown>, runId: RunId): void {
    work.catch((error: unknown) => this.#deps.logger.error({ err: error, run_id: runId }, "run step failed"));
  }
}

/**
 * Rule of Two: a run is tainted once it received a successful result from a tool whose contract marks its
 * output as untrusted content. Derived from the attached results, so every replica computes the same.
 */
function taintOf(results: readonly CallResultRecord[], registry: ToolRegistry): CallRecord["taint"] {
  return taintFrom(results.filter((r) => r.result.ok && registry.get(r.tool_name)?.contract.untrusted_output === true).map((r) => r.tool_name));
}

/** The taint of a run whose successful results came from these untrusted tools. */
function taintFrom(untrustedSources: readonly string[]): CallRecord["taint"] {
  const sources = [...new Set(untrustedSources)].sort();
  return { tainted: sources.length > 0, sources: sources.slice(0, 16) };
}

/** Names of the tools whose current contract marks their output as untrusted content. */
function untrustedTools(registry: ToolRegistry): string[] {
  return registry
    .list()
    .filter((t) => t.contract.untrusted_output === true)
    .map((t) => t.contract.name);
}

function isTerminal(event: CallEvent): event is TerminalEvent {
  return event.type === "rejected" || event.type === "denied" || event.type === "completed" || event.type === "outcome_unknown";
}

/** Tool calls of one response: ids present and unique, names and arguments bounded. */
function validateCalls(calls: ProposedToolCall[]): void {
  if (calls.length === 0 || calls.length > 64) throw new RunRequestError("INVALID_CALLS", "a response carries 1 to 64 tool calls");
  const ids = new Set<string>();
  for (const c of calls) {
    if (typeof c.id !== "string" || c.id.length === 0 || c.id.length > 256)
      throw new RunRequestError("INVALID_CALLS", "every tool call needs an id of at most 256 characters");
    if (ids.has(c.id)) throw new RunRequestError("INVALID_CALLS", `duplicate tool call id ${JSON.stringify(c.id.slice(0, 64))}`);
    ids.add(c.id);
    if (typeof c.name !== "string" || c.name.length > 256) throw new RunRequestError("INVALID_CALLS", "tool names are strings of at most 256 characters");
    if (typeof c.arguments !== "string" || Buffer.byteLength(c.arguments) > MAX_ARGUMENTS_JSON_BYTES) {
      throw new RunRequestError("INVALID_CALLS", `arguments are a JSON text of at most ${MAX_ARGUMENTS_JSON_BYTES} bytes`);
    }
  }
}
