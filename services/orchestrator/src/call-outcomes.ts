import { ACK, retryLater, terminate, type Delivery, type Disposition, type EventBus, type EventHandler } from "@toolgate/bus";
import { nextCallEvent, originOf, type CallEvent, type CallId, type RunId, type ToolgateEvent } from "@toolgate/contracts";
import type { ToolRegistry } from "@toolgate/registry";
import type { Counter, Logger } from "@toolgate/telemetry";
import type { CallScheduler } from "./call-scheduler.js";
import type { CallWaiters } from "./call-waiters.js";
import type { ActiveRun, LoopState } from "./loop-state.js";
import { UNKNOWN_TOOL_LABEL } from "./metrics.js";
import type { CallRecord, CallResultRecord, RunStore } from "./run-store.js";
import { callFromProposal } from "./proposals.js";
import { applyAnswer, type TurnPlayer } from "./turn-player.js";

type TerminalEvent = Extract<CallEvent, { type: "rejected" | "denied" | "completed" | "outcome_unknown" }>;

function isTerminal(event: CallEvent): event is TerminalEvent {
  return event.type === "rejected" || event.type === "denied" || event.type === "completed" || event.type === "outcome_unknown";
}

/**
 * How long an outcome whose call has no record yet is kept coming back before it is taken for one Toolgate never
 * proposed. A proposer that dies between its proposal and its record leaves the record to the host's retry, which
 * takes the request over once its claim lapses (up to MAX_HOLD_LEASES leases of a few seconds) — well after
 * the outcome may have arrived. The orphan sweep does not see a record written that late (its cursor has passed
 * the call's id), so the outcome itself waits for it: redelivered every few seconds, within the consumer's
 * delivery budget.
 */
const LATE_RECORD_WINDOW_MS = 60_000;
const LATE_RECORD_MAX_DELIVERIES = 18;
const LATE_RECORD_RECHECK_MAX_MS = 5_000;

export interface CallOutcomesDeps {
  store: RunStore;
  bus: EventBus;
  contracts: { registry(): ToolRegistry };
  scheduler: CallScheduler;
  waiters: CallWaiters;
  state: LoopState;
  player: TurnPlayer;
  logger: Logger;
  now: () => number;
  /** Counts each attached outcome once, by tool and outcome (`toolgate_calls_total`). */
  calls?: Counter<"tool" | "outcome">;
}

/**
 * What happens when a call ends: whoever waits for it is answered at once (the outcome is in the stream), the
 * outcome is attached under the call id before the event is acknowledged, locks are released, the next write
 * of the call's group is proposed, and a managed run whose turn is complete moves on to its next turn.
 */
export class CallOutcomes {
  readonly #deps: CallOutcomesDeps;

  constructor(deps: CallOutcomesDeps) {
    this.#deps = deps;
  }

  /** Consumes terminal call events (rejected, denied, completed, outcome_unknown). */
  readonly onTerminal: EventHandler = async (event: ToolgateEvent, delivery: Delivery): Promise<Disposition> => {
    if (event.kind !== "call" || !isTerminal(event)) return terminate(`orchestrator does not handle ${event.kind}.${event.type}`);
    const { store, state, waiters, logger } = this.#deps;
    const open = state.open(event.call_id);
    const result = event.payload.result;
    // The outcome is in the stream already; the attach below only records it for the run — unless the result
    // taints the run (untrusted content): the host must not be able to propose its next call, on any replica,
    // before that taint can be read back (Rule of Two).
    const answerFirst = open !== undefined && !(result.ok && this.#deps.contracts.registry().get(open.call.tool_name)?.untrustedOutput === true);
    if (answerFirst) waiters.resolve(event.call_id, result);
    // The call's own record, written alongside its proposal, is in the store before its outcome is; a record left
    // to be written later that has not started is written with the outcome instead, in one document.
    const withOutcome = open?.recorded.cancel() === true;
    const recorded = withOutcome ? undefined : open?.recorded.ensure();
    const stored = open ? undefined : await this.#storedCall(event.call_id);
    const call = open?.call ?? stored?.call;
    if (!call) {
      // The record of a call another replica proposed a moment ago may still be on its way to the store; a call
      // Toolgate never recorded (a message published by something else, or a proposer that died before its
      // record landed) gets no outcome attached.
      const age = this.#deps.now() - Date.parse(event.time);
      if (delivery.deliveryCount < LATE_RECORD_MAX_DELIVERIES && age < LATE_RECORD_WINDOW_MS) {
        return retryLater("no record of this call yet", Math.min(100 * 2 ** delivery.deliveryCount, LATE_RECORD_RECHECK_MAX_MS));
      }
      logger.warn({ call_id: event.call_id, run_id: event.run_id, type: event.type }, "terminal event for a call this orchestrator never recorded");
      return ACK;
    }
    const attach: CallResultRecord = {
      _id: call._id,
      run_id: call.run_id,
      turn: call.turn,
      provider_call_id: call.provider_call_id,
      tool_name: call.tool_name,
      terminal: event.type,
      result,
      ...(event.type === "completed" || event.type === "outcome_unknown" ? { duration_ms: event.payload.duration_ms } : {}),
      attached_at: new Date(this.#deps.now()),
    };
    // A managed run this process drives, at this call's turn: the outcome completes the turn or not in memory,
    // and when it does the next turn is claimed alongside the attach.
    const active = open && !open.external ? current(state.active(call.run_id), call) : undefined;
    active?.results.set(call._id, attach);
    const completes = active !== undefined && this.#deps.player.turnComplete(active);
    // The next turn starts now, alongside the attach (which lands before this event is acknowledged).
    if (completes) this.#deps.player.advance(active);
    const attaching = store.attachResult(attach, withOutcome || stored?.fromStream ? call : undefined);
    if (answerFirst) waiters.attaching(call._id, attaching);
    const [attached] = await Promise.all([attaching, recorded]);
    if (attached !== "duplicate") {
      // Only names a contract knows become label values: a model may propose any name (UNKNOWN_TOOL).
      const tool = event.tool?.name ?? this.#deps.contracts.registry().get(call.tool_name)?.contract.name ?? UNKNOWN_TOOL_LABEL;
      this.#deps.calls?.inc({ tool, outcome: result.ok ? "ok" : result.error.code });
    } else {
      const first = await store.getResult(call._id);
      if (first && first.terminal !== event.type)
        logger.error({ call_id: call._id, run_id: call.run_id, first: first.terminal, second: event.type }, "second terminal event for one call ignored");
    }
    // Always (a redelivery may follow a crash right after the attach): releasing twice is a no-op.
    await this.#deps.scheduler.finished(call);
    if (!answerFirst) waiters.resolve(call._id, result);
    await this.#deps.bus.publish(nextCallEvent(originOf(event), "result_attached", "orchestrator", { provider_call_id: call.provider_call_id, ok: result.ok }));
    state.untrack(call);
    if (completes) return ACK;
    if (active) {
      await this.#turnGoesOn(active);
      return ACK;
    }
    if (!active) await this.#afterElsewhere(call, open !== undefined);
    return ACK;
  };

  /**
   * After an outcome that did not complete its turn as far as this process knew. Other outcomes of the turn
   * may have reached other replicas, so the store (read after this attach landed) says what has ended: the
   * last of two attaches, wherever it happens, sees both. Then the turn completes here, or its next write (in
   * the model's order, once this one released its locks) is proposed — never one that has ended already.
   */
  async #turnGoesOn(active: ActiveRun): Promise<void> {
    const { run } = active;
    for (const r of await this.#deps.store.resultsOfTurn(run._id, run.turn)) active.results.set(r._id, r);
    if (this.#deps.player.turnComplete(active)) {
      if (await this.#deps.player.claimNext(active)) this.#deps.player.background(active);
      return;
    }
    if (active.calls.some((c) => c.write && !active.results.has(c._id))) {
      await this.#deps.scheduler.schedule(run, run.turn, active.calls, new Set(active.results.keys()));
    }
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
    this.#deps.state.watched.add(event.run_id);
    this.#deps.state.waitingForApproval.add(event.run_id);
    return ACK;
  };

  /** A call by id: one this process proposed, a recorded one, or one whose proposal is in the stream. */
  async findCall(callId: CallId): Promise<CallRecord | undefined> {
    return this.#deps.state.open(callId)?.call ?? (await this.#storedCall(callId))?.call;
  }

  /**
   * A call this process does not hold: its record in the store or, for a call recorded with its outcome by a
   * process that ended first, its proposal in the stream (`fromStream`: nothing in the store holds it yet).
   */
  async #storedCall(callId: CallId): Promise<{ call: CallRecord; fromStream: boolean } | undefined> {
    const recorded = await this.#deps.store.getCall(callId);
    if (recorded) return { call: recorded, fromStream: false };
    // Only a proposal its owner signed comes back from the stream (see `EventBus.lastEvent`).
    const proposal = await this.#deps.bus.lastEvent("call", callId, "proposed");
    if (proposal?.kind !== "call" || proposal.type !== "proposed") return undefined;
    return { call: callFromProposal(this.#deps.contracts.registry(), proposal), fromStream: true };
  }

  /** The calls of `runId` this process proposed whose records may still be on their way to the store. */
  unrecordedCalls(runId: RunId): CallRecord[] {
    return this.#deps.state.openOf(runId).map((o) => o.call);
  }

  /**
   * The next step of a run this process does not drive (or a host-driven run's group): a host's next write, or
   * a managed run's turn, from the store. A managed run whose turn this outcome completes is driven from here on.
   */
  async #afterElsewhere(call: CallRecord, proposedHere: boolean): Promise<void> {
    const external = this.#deps.state.external(call.run_id);
    if (external) await external.recorded.ensure();
    const run = external?.run ?? (await this.#deps.store.getRun(call.run_id));
    if (!run) return;
    if (run.status === "external") {
      // Only a write can be waiting for an earlier call of its group to end.
      if (!proposedHere || this.#deps.state.writesPending(call)) await this.#deps.scheduler.schedule(run, call.turn);
      return;
    }
    if (run.status !== "running") return;
    const loaded = await this.#deps.player.load(run._id);
    if (!loaded?.answer || loaded.active.run.turn !== call.turn) return;
    const { active, answer } = loaded;
    applyAnswer(active, answer.response, answer.calls, answer.tokens, new Date(this.#deps.now()));
    this.#deps.state.activate(active);
    await this.#turnGoesOn(active);
  }
}

/** The run's in-memory state when it is at `call`'s turn with its calls out; undefined for a stale outcome. */
function current(active: ActiveRun | undefined, call: CallRecord): ActiveRun | undefined {
  return active && active.run.turn === call.turn && active.run.awaiting === "tools" && active.calls.some((c) => c._id === call._id) ? active : undefined;
}
