import { ACK, retryLater, terminate, type Disposition, type EventBus, type EventHandler } from "@toolgate/bus";
import {
  failure,
  nextCallEvent,
  success,
  type CallEventOf,
  type CallEventOrigin,
  type JsonValue,
  type Principal,
  type ResultEnvelope,
  type ToolgateEvent,
  type ToolRef,
} from "@toolgate/contracts";
import type { CompiledTool, ToolContext, ToolOutcome, ToolRegistry } from "@toolgate/registry";
import type { Counter, Logger } from "@toolgate/telemetry";
import type { OperationControl } from "@toolgate/toolsets";
import type { Evidence } from "./judge-run.js";
import {
  isFinished,
  stateRank,
  type MongoOperationStore,
  type OperationRecord,
  type OperationState,
  type OperationView,
  type ReconciledOutcome,
} from "./operation-store.js";
import type { ToolRun } from "./run-tool.js";
import { parseOperationAnswer, parseReconciliationAnswer } from "./status-protocol.js";
import type { ToolInvoker } from "./tool-invoker.js";

export interface OperationDefaults {
  /** Status-check interval of jobs whose contract sets none. */
  pollMs: number;
  /** Longest a job may run when its contract sets no limit. */
  maxDurationMs: number;
  /** Wait before the first status check of an unknown outcome. */
  reconcileDelayMs: number;
  /** Interval between reconciliation attempts that find the outcome still unknown. */
  reconcilePollMs: number;
  /** An outcome still unknown after this is given up as `still_unknown`. */
  reconcileMaxMs: number;
}

export interface OperationTrackerDeps {
  store: MongoOperationStore;
  bus: EventBus;
  /** The contracts in force (the catalog); a record's own version is found by its hash. */
  contracts: { registry(): ToolRegistry };
  invoker: ToolInvoker;
  /** Keeps operator-facing details under a reference; never throws. */
  recordEvidence: (ref: string, callId: string, tool: string, attempt: number, evidence: Evidence) => Promise<void>;
  defaults: OperationDefaults;
  logger: Logger;
  now?: () => number;
  /** Counts each reconciliation this process settles, by tool and outcome (`toolgate_reconciliations_total`). */
  reconciliations?: Counter<"tool" | "outcome">;
}

/** Where an operation comes from: the call whose terminal result names it. */
export interface OperationStart {
  event: CallEventOf<"authorized">;
  tool: CompiledTool;
  idempotencyKey: string;
  attempt: number;
  /** Sequence of the call's terminal event. */
  seq: number;
}

/** The runtime's id of the operation started by `attempt` of call `callId`. */
export function operationId(callId: string, attempt: number): string {
  return `op_${callId.slice("call_".length)}_${attempt}`;
}

function owns(record: OperationRecord, principal: Principal): boolean {
  return record.principal.tenant === principal.tenant && record.principal.subject === principal.subject;
}

const notFound: ToolOutcome = { ok: false, code: "OBJECT_NOT_FOUND", message: "no operation with this id is visible to you" };

/**
 * Follows what goes on after a call's terminal event: a long-running tool's job (through its status check,
 * until it succeeds, fails, is cancelled or runs out of time) and the reconciliation of an unknown outcome
 * (through the tool's status check). State lives in the operation store; the work is driven by a durable
 * consumer of `operation_updated` events whose redelivery delay is the poll timer, so any executor replica
 * carries on after a crash. Each state change is published once per state (deterministic event ids).
 */
export class OperationTracker implements OperationControl {
  readonly #deps: OperationTrackerDeps;
  readonly #now: () => number;
  readonly #log: Logger;

  constructor(deps: OperationTrackerDeps) {
    this.#deps = deps;
    this.#now = deps.now ?? Date.now;
    this.#log = deps.logger.child({ component: "operations" });
  }

  /** Records the job a long-running tool accepted; returns the runtime's operation id. */
  async startJob(start: OperationStart, toolOperationId: string): Promise<string> {
    const limits = start.tool.contract.operation;
    const now = this.#now();
    return this.#create(start, {
      kind: "job",
      tool_operation_id: toolOperationId,
      not_before: new Date(now),
      deadline: new Date(now + (limits?.max_duration_ms ?? this.#deps.defaults.maxDurationMs)),
    });
  }

  /** Records the reconciliation of an unknown outcome through the tool's status check; returns its operation id. */
  async startReconciliation(start: OperationStart, cause: NonNullable<OperationRecord["cause"]>): Promise<string> {
    const now = this.#now();
    // After an abandoned attempt the lease has long expired; after a timeout a late effect may still be landing.
    const delay = cause === "abandoned" ? 0 : this.#deps.defaults.reconcileDelayMs;
    return this.#create(start, {
      kind: "reconciliation",
      cause,
      not_before: new Date(now + delay),
      deadline: new Date(now + delay + this.#deps.defaults.reconcileMaxMs),
    });
  }

  /** The exact contract version an operation was started with, or the tool's current version if unknown. */
  #toolOf(ref: ToolRef): CompiledTool | undefined {
    const registry = this.#deps.contracts.registry();
    return registry.getByHash(ref.hash) ?? registry.get(ref.name);
  }

  async #create(start: OperationStart, fields: Pick<OperationRecord, "kind" | "not_before" | "deadline" | "tool_operation_id" | "cause">): Promise<string> {
    const { event } = start;
    const id = operationId(event.call_id, start.attempt);
    await this.#deps.store.create({
      _id: id,
      call_id: event.call_id,
      run_id: event.run_id,
      principal: event.principal,
      context: event.payload.decision.context,
      tool: start.tool.ref,
      ...(event.args_hash === undefined ? {} : { args_hash: event.args_hash }),
      seq: start.seq,
      attempt: start.attempt,
      idempotency_key: start.idempotencyKey,
      created_at: new Date(this.#now()),
      ...fields,
    });
    return id;
  }

  /** Publishes the event of the operation's current state (again): idempotent, so safe after any crash. */
  async announce(id: string): Promise<void> {
    const view = await this.#deps.store.get(id);
    if (view) await this.#publishState(view);
  }

  /** Consumer of `operation_updated`: checks unfinished operations until they finish, their delivery delay being the poll timer. */
  readonly handler: EventHandler = async (event: ToolgateEvent, delivery): Promise<Disposition> => {
    if (event.kind !== "call" || event.type !== "operation_updated") return terminate(`operations do not handle ${event.kind}.${event.type}`);
    if (isFinished(event.payload.state)) return ACK;
    const view = await this.#deps.store.get(event.payload.operation_id);
    if (!view || view.record.call_id !== event.call_id) {
      this.#log.warn({ call_id: event.call_id, run_id: event.run_id, operation_id: event.payload.operation_id }, "update for an unknown operation ignored");
      return ACK;
    }
    if (stateRank(view.state) > stateRank(event.payload.state)) {
      // A later state exists: make sure its event is out (it carries on), then let this one go.
      await this.#publishState(view);
      return ACK;
    }
    const now = this.#now();
    const deadline = view.record.deadline.getTime();
    const notBefore = view.record.not_before.getTime();
    if (now < notBefore) return retryLater("operation not due yet", notBefore - now);
    if (now >= deadline) {
      await this.#expire(view);
      return ACK;
    }
    const progressed = view.record.kind === "job" ? await this.#checkJob(view) : await this.#reconcile(view);
    if (!progressed) return retryLater("operation unchanged", Math.min(this.#pollDelay(view, delivery.deliveryCount), deadline - now + 1));
    const next = await this.#deps.store.get(view.record._id);
    if (next) await this.#publishState(next);
    return ACK;
  };

  async status(id: string, ctx: ToolContext): Promise<ToolOutcome> {
    const view = await this.#deps.store.get(id);
    if (!view || !owns(view.record, ctx.principal)) return notFound;
    return {
      ok: true,
      data: {
        operation_id: id,
        kind: view.record.kind,
        tool: view.record.tool.name,
        state: view.state,
        ...(view.result ? { result: view.result as unknown as JsonValue } : {}),
        updated_at: view.updatedAt.toISOString(),
      },
    };
  }

  async cancel(id: string, ctx: ToolContext): Promise<ToolOutcome> {
    const view = await this.#deps.store.get(id);
    if (!view || !owns(view.record, ctx.principal)) return notFound;
    const answer = (state: OperationState): ToolOutcome =>
      state === "cancelled"
        ? { ok: true, data: { operation_id: id, state } }
        : { ok: false, code: "STATE_CONFLICT", message: `the operation is already ${state}`, details: { state } };
    if (view.record.kind === "reconciliation")
      return { ok: false, code: "STATE_CONFLICT", message: "the reconciliation of an unknown outcome cannot be cancelled" };
    if (isFinished(view.state)) return answer(view.state);
    const tool = this.#toolOf(view.record.tool);
    const cancelTool = tool?.contract.cancel ? this.#deps.contracts.registry().get(tool.contract.cancel.tool) : undefined;
    if (!cancelTool || view.record.tool_operation_id === undefined)
      return { ok: false, code: "STATE_CONFLICT", message: `${view.record.tool.name} cannot be cancelled` };
    const run = await this.#deps.invoker.run(
      cancelTool,
      { operation_id: view.record.tool_operation_id },
      { callId: ctx.callId, runId: ctx.runId, principal: ctx.principal, context: ctx.context, idempotencyKey: ctx.idempotencyKey },
    );
    const outcome = run.kind === "returned" ? run.answer.outcome : undefined;
    if (outcome?.ok === true) {
      await this.#deps.store.advance(id, "cancelled");
    } else if (outcome?.ok === false && outcome.code === "STATE_CONFLICT") {
      // The job finished first; the next status check records how.
      return { ok: false, code: "STATE_CONFLICT", message: "the operation already finished" };
    } else {
      return { ok: false, code: "UPSTREAM_UNAVAILABLE", message: "the cancellation could not be confirmed; try again", retryable: true };
    }
    const now = await this.#deps.store.get(id);
    if (!now) return notFound;
    await this.#publishState(now);
    return answer(now.state);
  }

  async #checkJob(view: OperationView): Promise<boolean> {
    const { record } = view;
    const tool = this.#toolOf(record.tool);
    const statusTool = tool?.contract.status_check ? this.#deps.contracts.registry().get(tool.contract.status_check.tool) : undefined;
    if (!tool || !statusTool || record.tool_operation_id === undefined) {
      return this.#finish(
        record,
        "failed",
        failure(record.call_id, "EXECUTION_ERROR", `${record.tool.name} can no longer be followed`, { operation_id: record._id }),
      );
    }
    const run = await this.#deps.invoker.run(statusTool, { operation_id: record.tool_operation_id }, this.#context(record));
    const data = this.#statusData(run, statusTool, record);
    if (data.kind === "transient") return false;
    if (data.kind === "failed") return this.#finish(record, "failed", data.result);
    const answer = parseOperationAnswer(data.value);
    if (!answer) return this.#invalidStatus(record, statusTool, data.value);
    switch (answer.state) {
      case "accepted":
        return false;
      case "running":
        return view.state === "accepted" ? this.#deps.store.advance(record._id, "running").then(() => true) : false;
      case "cancelled":
        return this.#finish(record, "cancelled");
      case "failed":
        return this.#finish(record, "failed", failure(record.call_id, answer.error.code, answer.error.message, { operation_id: record._id }));
      case "succeeded":
        return this.#finish(record, "succeeded", await this.#checkedResult(tool, record, answer.result ?? null));
    }
  }

  async #reconcile(view: OperationView): Promise<boolean> {
    const { record } = view;
    const tool = this.#toolOf(record.tool);
    const statusTool = tool?.contract.status_check ? this.#deps.contracts.registry().get(tool.contract.status_check.tool) : undefined;
    if (!tool || !statusTool) return false;
    const run = await this.#deps.invoker.run(statusTool, { idempotency_key: record.idempotency_key }, this.#context(record));
    const data = this.#statusData(run, statusTool, record);
    // Until the deadline, a status check that cannot answer is asked again.
    if (data.kind !== "ok") return false;
    const answer = parseReconciliationAnswer(data.value);
    if (!answer || answer.state === "unknown") {
      if (!answer) this.#log.warn({ operation_id: record._id, tool: statusTool.contract.name }, "status check answered outside the protocol");
      return false;
    }
    if (answer.state === "applied") {
      const result =
        answer.result === undefined ? success(record.call_id, null, { operation_id: record._id }) : await this.#checkedResult(tool, record, answer.result);
      return this.#finish(record, "succeeded", result, "applied");
    }
    const code = record.cause === "timeout" ? "TIMEOUT" : "EXECUTION_ERROR";
    const result = failure(record.call_id, code, `${record.tool.name} did not take effect: its status check found no trace of it`, {
      retryable: true,
      operation_id: record._id,
    });
    return this.#finish(record, "failed", result, "not_applied");
  }

  async #expire(view: OperationView): Promise<void> {
    const { record } = view;
    if (record.kind === "reconciliation") {
      const result = failure(record.call_id, "OUTCOME_UNKNOWN", `the outcome of ${record.tool.name} could not be established; an operator must check it`, {
        operation_id: record._id,
      });
      await this.#finish(record, "failed", result, "still_unknown");
    } else {
      const limit = record.deadline.getTime() - record.created_at.getTime();
      const tool = this.#toolOf(record.tool);
      const cancelTool = tool?.contract.cancel ? this.#deps.contracts.registry().get(tool.contract.cancel.tool) : undefined;
      let cancelled = false;
      if (cancelTool && record.tool_operation_id !== undefined) {
        const run = await this.#deps.invoker.run(cancelTool, { operation_id: record.tool_operation_id }, this.#context(record));
        cancelled = run.kind === "returned" && run.answer.outcome.ok === true;
      }
      const result = failure(record.call_id, "TIMEOUT", `the operation did not finish within ${limit} ms${cancelled ? " and was cancelled" : ""}`, {
        operation_id: record._id,
      });
      await this.#finish(record, cancelled ? "cancelled" : "failed", result);
    }
    const now = await this.#deps.store.get(record._id);
    if (now) await this.#publishState(now);
  }

  /** The status tool's data when it answered within its own contract; otherwise whether to ask again. */
  #statusData(
    run: ToolRun,
    statusTool: CompiledTool,
    record: OperationRecord,
  ): { kind: "ok"; value: unknown } | { kind: "transient" } | { kind: "failed"; result: ResultEnvelope } {
    if (run.kind !== "returned") return { kind: "transient" };
    const outcome = run.answer.outcome;
    if (outcome.ok === true) {
      const checked = this.#deps.contracts.registry().checkResult(statusTool, outcome.data);
      return checked.ok ? { kind: "ok", value: outcome.data } : { kind: "transient" };
    }
    if (outcome.ok === "accepted" || outcome.retryable === true || outcome.code === "UPSTREAM_UNAVAILABLE" || outcome.code === "RATE_LIMITED")
      return { kind: "transient" };
    return { kind: "failed", result: failure(record.call_id, outcome.code, outcome.message.slice(0, 1_024), { operation_id: record._id }) };
  }

  async #invalidStatus(record: OperationRecord, statusTool: CompiledTool, value: unknown): Promise<boolean> {
    const ref = `evd_${record._id}`;
    await this.#deps.recordEvidence(ref, record.call_id, statusTool.contract.name, record.attempt, { kind: "INVALID_STATUS_ANSWER", detail: value });
    return this.#finish(
      record,
      "failed",
      failure(record.call_id, "INVALID_TOOL_RESULT", `${statusTool.contract.name} answered outside the status protocol`, {
        operation_id: record._id,
        evidence_ref: ref,
      }),
    );
  }

  /** The operation's final data as a result, when it matches the tool's output schema (never forwarded otherwise). */
  async #checkedResult(tool: CompiledTool, record: OperationRecord, data: JsonValue): Promise<ResultEnvelope> {
    const checked = this.#deps.contracts.registry().checkResult(tool, data);
    if (checked.ok) return success(record.call_id, data, { operation_id: record._id });
    const ref = `evd_${record._id}`;
    await this.#deps.recordEvidence(ref, record.call_id, tool.contract.name, record.attempt, {
      kind: checked.code,
      detail: { message: checked.message, violations: checked.violations },
    });
    return failure(
      record.call_id,
      checked.code,
      checked.code === "RESULT_TOO_LARGE" ? checked.message : `${tool.contract.name} returned a result that does not match its contract`,
      { operation_id: record._id, evidence_ref: ref },
    );
  }

  async #finish(
    record: OperationRecord,
    state: Exclude<OperationState, "accepted" | "running">,
    result?: ResultEnvelope,
    reconciled?: ReconciledOutcome,
  ): Promise<boolean> {
    // Losing the race is fine: another executor (or a cancellation) finished it, and that state stands.
    const won = await this.#deps.store.advance(record._id, state, result, reconciled);
    if (won && reconciled !== undefined) this.#deps.reconciliations?.inc({ tool: record.tool.name, outcome: reconciled });
    return true;
  }

  #context(record: OperationRecord): Omit<ToolContext, "signal"> {
    return { callId: record.call_id, runId: record.run_id, principal: record.principal, context: record.context, idempotencyKey: record.idempotency_key };
  }

  #pollDelay(view: OperationView, deliveryCount: number): number {
    const base =
      view.record.kind === "job"
        ? (this.#toolOf(view.record.tool)?.contract.operation?.poll_interval_ms ?? this.#deps.defaults.pollMs)
        : this.#deps.defaults.reconcilePollMs;
    return Math.round(Math.min(base * 1.5 ** Math.max(0, deliveryCount - 1), base * 10));
  }

  async #publishState(view: OperationView): Promise<void> {
    const { record } = view;
    const rank = stateRank(view.state);
    const origin = (seq: number): CallEventOrigin => ({
      call_id: record.call_id,
      run_id: record.run_id,
      principal: record.principal,
      seq,
      tool: record.tool,
      ...(record.args_hash === undefined ? {} : { args_hash: record.args_hash }),
    });
    if (record.kind === "reconciliation" && view.reconciled !== undefined && view.result !== undefined) {
      await this.#deps.bus.publish(
        nextCallEvent(origin(record.seq + 3), "reconciled", "executor", { outcome: view.reconciled, result: view.result }, { attempt: record.attempt }),
      );
    }
    await this.#deps.bus.publish(
      nextCallEvent(
        origin(record.seq + rank - 1),
        "operation_updated",
        "executor",
        { operation_id: record._id, state: view.state, ...(view.result ? { result: view.result } : {}) },
        { attempt: rank },
      ),
    );
  }
}
