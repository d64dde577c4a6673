import type { EventBus } from "@toolgate/bus";
import { runEvent, TERMINAL_CALL_EVENT_TYPES, type CallEvent, type RunId } from "@toolgate/contracts";
import type { ModelAdapter, ModelResponse } from "@toolgate/models";
import type { ToolRegistry } from "@toolgate/registry";
import { stepKey, type Logger, type RunTraces } from "@toolgate/telemetry";
import { checkFinalAnswer, checkTurn, checkTurnStart, type Usage } from "./budgets.js";
import type { CallScheduler } from "./call-scheduler.js";
import { Durable } from "./durable.js";
import type { ActiveRun, LoopState, ProgressWriter } from "./loop-state.js";
import { callRecords, taintOf, validateCalls } from "./proposals.js";
import type { RunEnds } from "./run-ends.js";
import { startTurnSpan } from "./run-spans.js";
import type { CallRecord, CallResultRecord, RunRecord, RunStore, TurnRecord } from "./run-store.js";
import { transcriptOf } from "./transcript.js";

export interface TurnPlayerDeps {
  store: RunStore;
  bus: EventBus;
  contracts: { registry(): ToolRegistry };
  scheduler: CallScheduler;
  models: (name: string) => ModelAdapter | undefined;
  state: LoopState;
  progress: ProgressWriter;
  ends: RunEnds;
  instanceId: string;
  logger: Logger;
  now: () => number;
  /** With spans: each turn played is a span of the run's trace. */
  traces?: RunTraces | undefined;
}

/**
 * Plays the model turns of the managed runs this process drives (seed 001 §5): ask the model, record its
 * answer once (the first recorder wins), propose its calls, and when every call of the turn has an outcome,
 * move on to the next turn. A turn waits for one database round trip of its own — its claim and its answer,
 * written together — and everything else is held in memory and written behind.
 */
export class TurnPlayer {
  readonly #deps: TurnPlayerDeps;

  constructor(deps: TurnPlayerDeps) {
    this.#deps = deps;
  }

  /** Plays the turn the run is at (claimed by this process) in the background; failures are logged. */
  background(active: ActiveRun): void {
    this.play(active).catch((error: unknown) => this.#deps.logger.error({ err: error, run_id: active.run._id }, "run step failed"));
  }

  /** Plays the turn the run is at, which this process claimed (in the turn's span, with spans). */
  async play(active: ActiveRun): Promise<void> {
    const traces = this.#deps.traces;
    if (!traces) return this.#play(active);
    const span = startTurnSpan(traces, active.run);
    return traces.within(stepKey("run", active.run._id), span, () => this.#play(active)).finally(() => span.end());
  }

  async #play(active: ActiveRun): Promise<void> {
    const { store, ends, now } = this.#deps;
    const run = active.run;
    const registry = this.#deps.contracts.registry();
    const elapsed = now() - run.created_at.getTime();
    const early = checkTurnStart(run.budgets, run.turn, elapsed);
    if (early) {
      await ends.stop(run, early.reason, early.message);
      return;
    }
    const model = this.#deps.models(run.model);
    if (!model) {
      await ends.stop(run, "model_error", `no model adapter named ${run.model}`);
      return;
    }
    let response: ModelResponse;
    try {
      response = await model.respond(transcriptOf(run, [...active.results.values()], registry));
    } catch (error) {
      this.#deps.logger.warn({ err: error, run_id: run._id }, "model request failed");
      await ends.stop(run, "model_error", "the model request failed");
      return;
    }
    let tokens = response.tokens ?? 0;
    let records: CallRecord[] = [];
    if (response.kind === "tool_calls" && response.calls.length > 0) {
      try {
        validateCalls(response.calls);
        records = callRecords(registry, run, run.turn, response.calls, taintOf(active.results.values(), registry), new Date(now()));
      } catch (error) {
        await ends.stop(run, "model_error", (error as Error).message);
        return;
      }
      const breach = checkTurn(run.budgets, run.usage, { calls: records.map((r) => r.signature), tokens }, elapsed);
      if (breach) {
        await ends.stop(run, breach.reason, breach.message);
        return;
      }
    } else {
      const breach = checkFinalAnswer(run.budgets, run.usage, tokens);
      if (breach) {
        await ends.stop(run, breach.reason, breach.message);
        return;
      }
    }
    // The answer is recorded once: the first recorder wins and its calls are the ones that run; a run that
    // ended meanwhile (a sweep, a cancel, another replica) closed the turn, and nothing is proposed.
    const recording = await store.recordTurn({ run_id: run._id, turn: run.turn, response, calls: records, tokens, at: new Date(now()) });
    if (recording.kind === "closed") {
      await ends.endedElsewhere(run._id);
      return;
    }
    if (recording.kind === "recorded_before") ({ response, calls: records, tokens } = recording.first);
    await this.continueTurn(active, response, records, tokens);
  }

  /** Acts on the recorded answer of the run's turn: propose its calls, or end the run. Safe to repeat. */
  async continueTurn(active: ActiveRun, response: ModelResponse, records: CallRecord[], tokens: number): Promise<void> {
    const { bus, state, progress, ends } = this.#deps;
    const run = active.run;
    if (records.length > 0) {
      applyAnswer(active, response, records, tokens, new Date(this.#deps.now()));
      const { responses, usage } = active.run;
      progress.write(run._id, { responses, usage, tool_calls: usage.tool_calls, awaiting: "tools" });
      // The turn's record holds the calls, and each outcome carries its call. (After a restart, the calls that
      // have an outcome already are done.)
      state.track(
        records.filter((r) => !active.results.has(r._id)),
        false,
        Durable.done(),
      );
      await Promise.all([
        bus.publish(
          runEvent({ run_id: run._id, principal: run.principal }, "model_responded", "orchestrator", run.turn, {
            turn: run.turn,
            outcome: "tool_calls",
            tool_calls: records.length,
            ...turnFacts(response),
          }),
        ),
        this.proceed(active),
      ]);
      return;
    }
    if (response.kind === "refusal") {
      await ends.stop(run, "refusal", response.text.slice(0, 2048));
      return;
    }
    const text = response.kind === "final" ? response.text : (response.text ?? "");
    const ended = await ends.complete(run, {
      status: "completed",
      turn: run.turn,
      final_text: text,
      responses: [...run.responses.filter((r) => r.turn !== run.turn), { turn: run.turn, response, call_ids: [] }],
      usage: { ...run.usage, turns: run.turn + 1, tokens: run.usage.tokens + tokens },
      tool_calls: run.tool_calls,
    });
    // A stop that got there first (a budget swept meanwhile) stands; this answer then ends nothing.
    if (!ended) return;
    await bus.publish(
      runEvent({ run_id: run._id, principal: run.principal }, "model_responded", "orchestrator", run.turn, {
        turn: run.turn,
        outcome: "final",
        tool_calls: 0,
        ...turnFacts(response),
      }),
    );
  }

  /**
   * Moves the run's turn on: proposes what may run now (every read, the next write when its locks are free),
   * and once every call of the turn has its outcome, claims the next turn and plays it in the background.
   */
  async proceed(active: ActiveRun): Promise<void> {
    if (this.turnComplete(active)) {
      if (await this.claimNext(active)) this.background(active);
      return;
    }
    await this.#deps.scheduler.schedule(active.run, active.run.turn, active.calls, new Set(active.results.keys()));
  }

  /** Whether every call of the run's current turn has its outcome. */
  turnComplete(active: ActiveRun): boolean {
    return active.run.awaiting === "tools" && active.calls.every((c) => active.results.has(c._id));
  }

  /**
   * Moves the run this process drives to its next turn and plays it at once, the turn's claim written alongside
   * the model request instead of before it: this process saw the turn complete in memory, and whose calls run
   * is decided by the first recorder of the turn's answer anyway. The claim keeps other replicas (and later
   * restarts) from asking the model for this turn too; if another replica got there first, both answers race to
   * be recorded and only the first one's calls are proposed, by either.
   */
  advance(active: ActiveRun): void {
    const run = active.run;
    const next = run.turn + 1;
    if (active.claiming !== undefined && active.claiming >= next) return;
    active.claiming = next;
    this.#deps.store.claimTurn(run._id, next, this.#deps.instanceId).then(
      (won) => {
        if (!won) this.#deps.logger.debug({ run_id: run._id, turn: next }, "another process claimed the turn this one is playing");
      },
      (error: unknown) => this.#deps.logger.warn({ err: error, run_id: run._id, turn: next }, "turn claim not written; a restart goes by the turn records"),
    );
    active.run = { ...active.run, turn: next, awaiting: "model", updated_at: new Date(this.#deps.now()) };
    active.calls = [];
    this.#deps.progress.write(run._id, { turn: next, awaiting: "model" });
    this.background(active);
  }

  /**
   * Claims the run's next turn: one claim wins, whichever handler or replica saw the turn complete. When this
   * process wins, the run is at that turn (awaiting the model) and the caller plays it; when it loses, another
   * replica drives the run from now on.
   */
  async claimNext(active: ActiveRun): Promise<boolean> {
    const run = active.run;
    const next = run.turn + 1;
    if (active.claiming !== undefined && active.claiming >= next) return false;
    active.claiming = next;
    if (!(await this.#deps.store.claimTurn(run._id, next, this.#deps.instanceId))) {
      this.#deps.state.deactivate(run._id);
      return false;
    }
    active.run = { ...active.run, turn: next, awaiting: "model", updated_at: new Date(this.#deps.now()) };
    active.calls = [];
    this.#deps.progress.write(run._id, { turn: next, awaiting: "model" });
    return true;
  }

  /**
   * The state of a running run as the store and the stream have it: at the latest claimed turn, with the
   * answers recorded before it and every attached result — including outcomes still only in the stream (the
   * process that received them stopped after claiming the turn, before its attach landed), attached now — and
   * the latest turn's recorded answer, if the model has given it. Undefined once the run has ended.
   */
  async load(runId: RunId): Promise<{ active: ActiveRun; answer: TurnRecord | undefined } | undefined> {
    const { store } = this.#deps;
    const run = await store.getRun(runId);
    if (!run || run.status !== "running") return undefined;
    const [turns, stored, latest] = await Promise.all([store.turnsOf(runId), store.resultsOf(runId), store.latestClaimedTurn(runId, run.turn)]);
    const active: ActiveRun = { run: runAt(run, turns, latest), calls: [], results: new Map(stored.map((r) => [r._id, r])) };
    const answer = turns.find((t) => t.turn === latest);
    const previous = turns.find((t) => t.turn === latest - 1);
    if (!answer && previous) {
      for (const call of previous.calls) {
        if (active.results.has(call._id)) continue;
        const result = await this.#outcomeInStream(call);
        if (result) active.results.set(call._id, result);
      }
    }
    return { active, answer };
  }

  /** The terminal outcome of a call as the stream holds it, attached now; undefined when it has none yet. */
  async #outcomeInStream(call: CallRecord): Promise<CallResultRecord | undefined> {
    for (const type of TERMINAL_CALL_EVENT_TYPES) {
      const event = (await this.#deps.bus.lastEvent("call", call._id, type)) as CallEvent | undefined;
      if (event?.kind !== "call" || event.type !== type || !("result" in event.payload)) continue;
      const record: CallResultRecord = {
        _id: call._id,
        run_id: call.run_id,
        turn: call.turn,
        provider_call_id: call.provider_call_id,
        tool_name: call.tool_name,
        terminal: type,
        result: event.payload.result,
        ...("duration_ms" in event.payload ? { duration_ms: event.payload.duration_ms } : {}),
        attached_at: new Date(this.#deps.now()),
      };
      await this.#deps.store.attachResult(record);
      this.#deps.logger.warn({ call_id: call._id, run_id: call.run_id }, "outcome attached from the stream after a restart");
      return record;
    }
    return undefined;
  }
}

/** What a run has used after a turn that proposed `records`. */
function usageAfter(usage: Usage, turn: number, records: readonly CallRecord[], tokens: number): Usage {
  const signatures = { ...usage.signatures };
  for (const r of records) signatures[r.signature] = (signatures[r.signature] ?? 0) + 1;
  return { turns: turn + 1, tool_calls: usage.tool_calls + records.length, tokens: usage.tokens + tokens, signatures };
}

/** Applies a recorded answer that proposed `records` to the run: its usage, its response, its calls. */
export function applyAnswer(active: ActiveRun, response: ModelResponse, records: CallRecord[], tokens: number, now: Date): void {
  const run = active.run;
  const usage = usageAfter(run.usage, run.turn, records, tokens);
  const responses = [...run.responses.filter((r) => r.turn !== run.turn), { turn: run.turn, response, call_ids: records.map((r) => r._id) }];
  active.run = { ...run, responses, usage, tool_calls: usage.tool_calls, awaiting: "tools", updated_at: now };
  active.calls = records;
}

/**
 * A running run at turn `latest`, awaiting the model, rebuilt from the answers recorded before it (the run
 * document is written behind the turn records and claims, which are what count). Pure.
 */
export function runAt(run: RunRecord, turns: readonly TurnRecord[], latest: number): RunRecord {
  let usage: Usage = { turns: 0, tool_calls: 0, tokens: 0, signatures: {} };
  const responses: RunRecord["responses"] = [];
  for (const t of [...turns].sort((a, b) => a.turn - b.turn)) {
    if (t.turn >= latest) break;
    responses.push({ turn: t.turn, response: t.response, call_ids: t.calls.map((c) => c._id) });
    usage = usageAfter(usage, t.turn, t.calls, t.tokens);
  }
  return { ...run, turn: latest, responses, usage, tool_calls: usage.tool_calls, awaiting: "model" };
}

/** What the audit chain keeps of a model turn besides its outcome: the snapshot that answered and its tokens. */
function turnFacts(response: ModelResponse): { model_version?: string; tokens?: number } {
  return {
    ...(response.modelVersion ? { model_version: response.modelVersion.slice(0, 128) } : {}),
    ...(response.tokens !== undefined ? { tokens: Math.max(0, Math.round(response.tokens)) } : {}),
  };
}
