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
import type { Logger } from "@toolgate/telemetry";
import type { ModelAdapter, ModelResponse, ProposedToolCall, TranscriptItem } from "./model.js";
import type { CallRecord, RunRecord, RunStore } from "./run-store.js";
import type { CallWaiters } from "./call-waiters.js";

export interface RunLoopDeps {
  store: RunStore;
  bus: EventBus;
  /** Resolves a model name (e.g. `scripted:c04`) to its adapter. */
  models: (name: string) => ModelAdapter | undefined;
  waiters: CallWaiters;
  maxTurns: number;
  /** This process's identity in turn claims. */
  instanceId: string;
  logger: Logger;
}

/** A request the run loop refuses; the API maps it to a 4xx with this code. */
export class RunRequestError extends Error {
  constructor(
    readonly code: "UNKNOWN_MODEL" | "RUN_NOT_FOUND" | "RUN_NOT_EXTERNAL" | "INVALID_CALLS",
    message: string,
  ) {
    super(message);
    this.name = "RunRequestError";
  }
}

const MAX_OPEN_CALLS_CACHED = 100_000;

type TerminalEvent = Extract<CallEvent, { type: "rejected" | "denied" | "completed" | "outcome_unknown" }>;

/**
 * The tool loop: asks the model, persists and publishes its tool calls as `proposed` events, attaches each
 * terminal outcome under its call id, and goes back to the model once every call of the turn has ended.
 * A turn is played by whoever inserts its claim first, so handlers and replicas never double-advance a run.
 */
export class RunLoop {
  readonly #deps: RunLoopDeps;
  /** Host-driven runs this process created or checked: their owner and status never change. */
  readonly #externalRuns = new Map<RunId, RunRecord>();
  /** Calls this process proposed and that have no outcome yet: saves a read per terminal event. */
  readonly #open = new Map<CallId, { call: CallRecord; external: boolean }>();

  constructor(deps: RunLoopDeps) {
    this.#deps = deps;
  }

  /** Creates a managed run and plays its first model turn in the background. */
  async startRun(principal: Principal, model: string, input: string, context: RunContext): Promise<RunId> {
    if (!this.#deps.models(model)) throw new RunRequestError("UNKNOWN_MODEL", `no model adapter named ${model}`);
    const run = this.#newRun(principal, model, input, context, "running");
    await this.#deps.store.insertRun(run);
    await this.#deps.store.claimTurn(run._id, 0, this.#deps.instanceId);
    await this.#deps.bus.publish(runEvent({ run_id: run._id, principal }, "started", "orchestrator", 0, { model, context }));
    void this.#playModelTurn(run).catch((error: unknown) => this.#deps.logger.error({ err: error, run_id: run._id }, "model turn failed"));
    return run._id;
  }

  /**
   * Bring-your-own-loop: the host ran the model; Toolgate validates, authorizes and executes its tool calls.
   * Returns the runtime call id of each proposed call, in order.
   */
  async submitCalls(
    principal: Principal,
    request: { runId?: RunId; context: RunContext; calls: ProposedToolCall[] },
    beforePublish: (callIds: CallId[]) => void = () => undefined,
  ): Promise<{ runId: RunId; callIds: CallId[] }> {
    validateCalls(request.calls);
    let run: RunRecord;
    const known = request.runId ? this.#externalRuns.get(request.runId) : undefined;
    if (known && known.principal.tenant === principal.tenant && known.principal.subject === principal.subject) {
      run = known;
    } else if (request.runId) {
      const existing = await this.#deps.store.getRun(request.runId);
      if (!existing || existing.principal.tenant !== principal.tenant || existing.principal.subject !== principal.subject) {
        throw new RunRequestError("RUN_NOT_FOUND", "no such run");
      }
      if (existing.status !== "external") throw new RunRequestError("RUN_NOT_EXTERNAL", "this run is driven by Toolgate's own loop");
      run = existing;
      this.#rememberExternal(run);
    } else {
      run = this.#newRun(principal, "external", "", request.context, "external");
      await this.#deps.store.insertRun(run);
      this.#rememberExternal(run);
      await this.#deps.bus.publish(runEvent({ run_id: run._id, principal }, "started", "orchestrator", 0, { model: "external", context: request.context }));
    }
    const records = this.#callRecords(run, run.turn, request.calls);
    beforePublish(records.map((r) => r._id));
    await this.#proposeAll(run, records);
    return { runId: run._id, callIds: records.map((r) => r._id) };
  }

  /** Consumes terminal call events: attach, notify waiters, advance the run when its turn is complete. */
  readonly onTerminal: EventHandler = async (event: ToolgateEvent): Promise<Disposition> => {
    if (event.kind !== "call" || !isTerminal(event)) return terminate(`orchestrator does not handle ${event.kind}.${event.type}`);
    const open = this.#open.get(event.call_id);
    const call = open?.call ?? (await this.#deps.store.getCall(event.call_id));
    if (!call) {
      this.#deps.logger.warn({ call_id: event.call_id, type: event.type }, "terminal event for a call this orchestrator never proposed");
      return ACK;
    }
    const result = event.payload.result;
    const attached = await this.#deps.store.attachResult({
      _id: call._id,
      run_id: call.run_id,
      turn: call.turn,
      provider_call_id: call.provider_call_id,
      tool_name: call.tool_name,
      terminal: event.type,
      result,
      ...(event.type === "completed" || event.type === "outcome_unknown" ? { duration_ms: event.payload.duration_ms } : {}),
      attached_at: new Date(),
    });
    if (attached === "duplicate") {
      const first = await this.#deps.store.getResult(call._id);
      if (first && first.terminal !== event.type)
        this.#deps.logger.error({ call_id: call._id, first: first.terminal, second: event.type }, "second terminal event for one call ignored");
    }
    // Local waiters first: the result_attached echo then finds nobody here still waiting for it.
    this.#deps.waiters.resolve(call._id, result);
    // Re-published after a crash too: the deterministic event id makes it a no-op when it already exists.
    await this.#deps.bus.publish(nextCallEvent(originOf(event), "result_attached", "orchestrator", { provider_call_id: call.provider_call_id, ok: result.ok }));
    this.#open.delete(call._id);
    // A host-driven run has no model turn to advance.
    if (!open?.external) await this.#advanceIfTurnComplete(call);
    return ACK;
  };

  /** Plays the model turn of runs a previous process left waiting for the model (after a crash or restart). */
  async resume(): Promise<number> {
    const waiting = await this.#deps.store.runs.find({ status: "running", awaiting: "model" }).toArray();
    for (const run of waiting)
      void this.#playModelTurn(run).catch((error: unknown) => this.#deps.logger.error({ err: error, run_id: run._id }, "resumed model turn failed"));
    return waiting.length;
  }

  async #advanceIfTurnComplete(call: CallRecord): Promise<void> {
    const run = await this.#deps.store.getRun(call.run_id);
    if (!run || run.status !== "running" || run.awaiting !== "tools" || run.turn !== call.turn) return;
    const expected = run.responses.find((r) => r.turn === run.turn)?.call_ids.length ?? 0;
    if ((await this.#deps.store.countResults(run._id, run.turn)) < expected) return;
    // Several handlers (and replicas) can see the turn complete at once; one claim wins.
    if (!(await this.#deps.store.claimTurn(run._id, run.turn + 1, this.#deps.instanceId))) return;
    const advanced: RunRecord = { ...run, turn: run.turn + 1, awaiting: "model", updated_at: new Date() };
    await this.#deps.store.runs.updateOne({ _id: run._id }, { $set: { turn: advanced.turn, awaiting: "model", updated_at: advanced.updated_at } });
    await this.#playModelTurn(advanced);
  }

  async #playModelTurn(run: RunRecord): Promise<void> {
    const { store, bus } = this.#deps;
    if (run.turn >= this.#deps.maxTurns) {
      await this.#stop(run, "budget_turns", `the run reached its limit of ${this.#deps.maxTurns} model turns`);
      return;
    }
    const model = this.#deps.models(run.model);
    if (!model) {
      await this.#stop(run, "model_error", `no model adapter named ${run.model}`);
      return;
    }
    let response: ModelResponse;
    try {
      response = await model.respond(await this.#transcript(run));
    } catch (error) {
      this.#deps.logger.warn({ err: error, run_id: run._id }, "model request failed");
      await this.#stop(run, "model_error", "the model request failed");
      return;
    }
    const principal = run.principal;
    if (response.kind === "tool_calls" && response.calls.length > 0) {
      let records: CallRecord[];
      try {
        validateCalls(response.calls);
        records = this.#callRecords(run, run.turn, response.calls);
      } catch (error) {
        await this.#stop(run, "model_error", (error as Error).message);
        return;
      }
      // Only the holder of this turn's claim gets here: the run record has a single writer.
      await store.runs.updateOne(
        { _id: run._id },
        {
          $push: { responses: { turn: run.turn, response, call_ids: records.map((r) => r._id) } },
          $set: { awaiting: "tools", updated_at: new Date() },
          $inc: { tool_calls: records.length },
        },
      );
      await bus.publish(
        runEvent({ run_id: run._id, principal }, "model_responded", "orchestrator", run.turn, {
          turn: run.turn,
          outcome: "tool_calls",
          tool_calls: records.length,
        }),
      );
      await this.#proposeAll(run, records);
      return;
    }
    if (response.kind === "refusal") {
      await this.#stop(run, "refusal", response.text.slice(0, 2048));
      return;
    }
    const text = response.kind === "final" ? response.text : (response.text ?? "");
    const done = await store.runs.updateOne(
      { _id: run._id, turn: run.turn, awaiting: "model" },
      {
        $push: { responses: { turn: run.turn, response, call_ids: [] } },
        $set: { status: "completed", awaiting: "nothing", final_text: text, updated_at: new Date() },
      },
    );
    if (done.modifiedCount === 0) return;
    await bus.publish(
      runEvent({ run_id: run._id, principal }, "model_responded", "orchestrator", run.turn, { turn: run.turn, outcome: "final", tool_calls: 0 }),
    );
    await bus.publish(
      runEvent({ run_id: run._id, principal }, "completed", "orchestrator", run.turn, {
        turns: run.turn + 1,
        tool_calls: run.tool_calls,
        final_text: text.slice(0, 64 * 1024),
      }),
    );
  }

  async #stop(run: RunRecord, reason: "budget_turns" | "model_error" | "refusal", message: string): Promise<void> {
    await this.#deps.store.runs.updateOne(
      { _id: run._id },
      { $set: { status: "stopped", awaiting: "nothing", stop_reason: reason, final_text: message, updated_at: new Date() } },
    );
    await this.#deps.bus.publish(runEvent({ run_id: run._id, principal: run.principal }, "stopped", "orchestrator", run.turn, { reason, message }));
  }

  async #transcript(run: RunRecord): Promise<TranscriptItem[]> {
    const results = await this.#deps.store.resultsOf(run._id);
    const byCall = new Map(results.map((r) => [r._id, r]));
    const items: TranscriptItem[] = [{ role: "user", text: run.input }];
    for (const turn of [...run.responses].sort((a, b) => a.turn - b.turn)) {
      items.push({ role: "assistant", response: turn.response });
      turn.call_ids.forEach((callId) => {
        const r = byCall.get(callId);
        if (r) items.push({ role: "tool", call_id: r.provider_call_id, name: r.tool_name, result: r.result });
      });
    }
    return items;
  }

  #rememberExternal(run: RunRecord): void {
    if (this.#externalRuns.size >= MAX_OPEN_CALLS_CACHED) this.#externalRuns.delete(this.#externalRuns.keys().next().value!);
    this.#externalRuns.set(run._id, run);
  }

  #newRun(principal: Principal, model: string, input: string, context: RunContext, status: RunRecord["status"]): RunRecord {
    const now = new Date();
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
      created_at: now,
      updated_at: now,
    };
  }

  #callRecords(run: RunRecord, turn: number, calls: ProposedToolCall[]): CallRecord[] {
    const now = new Date();
    return calls.map((c) => ({
      _id: newCallId(),
      run_id: run._id,
      turn,
      provider_call_id: c.id,
      tool_name: c.name,
      arguments_json: c.arguments,
      created_at: now,
    }));
  }

  async #proposeAll(run: RunRecord, records: CallRecord[]): Promise<void> {
    await this.#deps.store.insertCalls(records);
    for (const call of records) {
      // Oldest first out: a call whose outcome another replica attached is only a cache miss, never wrong.
      if (this.#open.size >= MAX_OPEN_CALLS_CACHED) this.#open.delete(this.#open.keys().next().value!);
      this.#open.set(call._id, { call, external: run.status === "external" });
    }
    await Promise.all(
      records.map((r) =>
        this.#deps.bus.publish(
          nextCallEvent({ call_id: r._id, run_id: run._id, principal: run.principal, seq: 0 }, "proposed", "orchestrator", {
            provider_call_id: r.provider_call_id,
            tool_name: r.tool_name,
            arguments_json: r.arguments_json,
            context: run.context,
            turn: r.turn,
          }),
        ),
      ),
    );
  }
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
