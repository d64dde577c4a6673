import { ACK, retryLater, terminate, type Delivery, type Disposition, type EventBus, type EventHandler } from "@toolgate/bus";
import {
  canonicalHash,
  failure,
  nextCallEvent,
  originOf,
  success,
  type CallEventOf,
  type CallEventOrigin,
  type DecisionVerifier,
  type JsonValue,
  type ResultEnvelope,
  type ToolgateEvent,
} from "@toolgate/contracts";
import type { CompiledTool, ToolContext, ToolDefinition, ToolRegistry } from "@toolgate/registry";
import type { IdempotencyStore } from "@toolgate/storage";
import type { Logger } from "@toolgate/telemetry";
import type { Collection } from "mongodb";
import { idempotencyKey, keyDigest } from "./idempotency-key.js";
import { runTool, type ToolRun } from "./run-tool.js";

/** Operator-facing details of a failure the model only sees as a code and an `evidence_ref`. */
export interface EvidenceRecord {
  _id: string;
  call_id: string;
  tool: string;
  attempt: number;
  executor: string;
  kind: string;
  detail: unknown;
  at: Date;
}

export interface ExecutorDeps {
  bus: EventBus;
  registry: ToolRegistry;
  /** In-process implementations by tool name, with their optional object and state layers. */
  definitions: ReadonlyMap<string, ToolDefinition>;
  store: IdempotencyStore;
  verifier: DecisionVerifier;
  evidence: Collection<EvidenceRecord>;
  executorId: string;
  leaseMarginMs: number;
  logger: Logger;
  /** Aborted when the process stops: running tools see it through their AbortSignal. */
  shutdown: AbortSignal;
  now?: () => number;
}

type Authorized = CallEventOf<"authorized">;

/**
 * The handler preceded by the tool's object layer (ids must resolve to exactly one object) and state layer
 * (the objects' state must allow the action), all within the contract's timeout.
 */
function withLayers(definition: ToolDefinition): ToolDefinition["handler"] {
  const { resolve, precheck, handler } = definition;
  if (!resolve && !precheck) return handler;
  return async (args, ctx: ToolContext) => {
    let objects: Record<string, JsonValue> = {};
    if (resolve) {
      const resolved = await resolve(args, ctx);
      if (!resolved.ok) return { ok: false, code: resolved.code, message: resolved.message };
      objects = resolved.objects;
    }
    if (precheck) {
      const checked = await precheck(args, objects, ctx);
      if (!checked.ok) return { ok: false, code: checked.code, message: checked.message };
    }
    return handler(args, ctx);
  };
}

/** Why an authorization is refused before anything runs. */
function refusal(event: Authorized, verifier: DecisionVerifier): string | undefined {
  const { decision, signature, arguments: args } = event.payload;
  const signatureProblem = verifier.check(decision, signature);
  if (signatureProblem) return signatureProblem;
  if (decision.call_id !== event.call_id || decision.run_id !== event.run_id) return "decision_for_another_call";
  if (event.tool && event.tool.hash !== decision.tool.hash) return "envelope_tool_mismatch";
  if (canonicalHash(args) !== decision.args_hash) return "arguments_not_bound";
  return undefined;
}

/**
 * Executes each signed `authorized` call at most once per idempotency key and publishes its terminal event.
 * A fenced-out executor (its lease was taken over) publishes nothing; the current owner will.
 */
export function executorHandler(deps: ExecutorDeps): EventHandler {
  const now = deps.now ?? Date.now;
  const log = deps.logger;

  async function publishTerminal(origin: CallEventOrigin, result: ResultEnvelope, attempt: number, durationMs: number): Promise<void> {
    const event =
      !result.ok && result.error.code === "OUTCOME_UNKNOWN"
        ? nextCallEvent(origin, "outcome_unknown", "executor", { result, duration_ms: durationMs }, { attempt })
        : nextCallEvent(origin, "completed", "executor", { result, duration_ms: durationMs }, { attempt });
    await deps.bus.publish(event);
  }

  async function recordEvidence(ref: string, event: Authorized, attempt: number, kind: string, detail: unknown): Promise<void> {
    await deps.evidence
      .insertOne({ _id: ref, call_id: event.call_id, tool: event.payload.decision.tool.name, attempt, executor: deps.executorId, kind, detail, at: new Date() })
      .catch((error: unknown) => log.warn({ err: error, evidence_ref: ref }, "could not store evidence"));
  }

  async function resultOf(run: ToolRun, tool: CompiledTool, event: Authorized, attempt: number): Promise<ResultEnvelope> {
    const callId = event.call_id;
    const evidenceRef = `evd_${callId.slice(5)}_${attempt}`;
    switch (run.kind) {
      case "timed_out":
        // A read can be retried safely; a write may have happened, so it is reconciled, never guessed.
        return tool.contract.side_effect === "none" || tool.contract.side_effect === "read"
          ? failure(callId, "TIMEOUT", `${tool.contract.name} did not answer within ${tool.contract.timeout_ms} ms`, { retryable: true })
          : failure(
              callId,
              "OUTCOME_UNKNOWN",
              `${tool.contract.name} did not answer within ${tool.contract.timeout_ms} ms; its effect is unknown and will be reconciled`,
            );
      case "threw": {
        const error = run.error as Error;
        await recordEvidence(evidenceRef, event, attempt, "exception", { name: error?.name, message: error?.message, stack: error?.stack });
        log.warn({ err: run.error, call_id: callId, evidence_ref: evidenceRef }, "tool threw");
        return failure(callId, "EXECUTION_ERROR", `${tool.contract.name} failed`, { evidence_ref: evidenceRef });
      }
      case "returned": {
        const outcome = run.outcome;
        if (outcome.ok === "accepted") {
          return success(callId, { operation_id: outcome.operation_id, state: "accepted" }, { operation_id: outcome.operation_id });
        }
        if (!outcome.ok) {
          return failure(callId, outcome.code, outcome.message.slice(0, 1024), {
            ...(outcome.details ? { details: outcome.details } : {}),
            ...(outcome.retryable === undefined ? {} : { retryable: outcome.retryable }),
          });
        }
        const checked = deps.registry.checkResult(tool, outcome.data);
        if (!checked.ok) {
          await recordEvidence(evidenceRef, event, attempt, checked.code, { message: checked.message, violations: checked.violations });
          return failure(
            callId,
            checked.code,
            checked.code === "RESULT_TOO_LARGE" ? checked.message : `${tool.contract.name} returned a result that does not match its contract`,
            {
              evidence_ref: evidenceRef,
            },
          );
        }
        return success(callId, outcome.data, outcome.truncated ? { truncated: true } : {});
      }
    }
  }

  async function execute(event: Authorized, delivery: Delivery): Promise<Disposition> {
    const reason = refusal(event, deps.verifier);
    if (reason) {
      log.warn({ call_id: event.call_id, reason, stream_seq: delivery.streamSeq }, "authorization refused");
      return terminate(`authorization refused: ${reason}`);
    }
    const { decision, arguments: args } = event.payload;
    const origin = originOf(event);
    if (Date.parse(decision.expires_at) <= now()) {
      await publishTerminal(origin, failure(event.call_id, "PERMISSION_DENIED", "the authorization expired before the call could run"), 1, 0);
      return ACK;
    }
    const tool = deps.registry.get(decision.tool.name);
    const definition = deps.definitions.get(decision.tool.name);
    if (!tool || !definition || tool.hash !== decision.tool.hash || !tool.contract.enabled) {
      // Never act on a contract other than the one the call was validated against.
      await publishTerminal(
        origin,
        failure(event.call_id, "TOOL_DISABLED", `${decision.tool.name}@${decision.tool.version} is not available on this executor`),
        1,
        0,
      );
      return ACK;
    }

    const key = idempotencyKey(tool.contract, decision, args);
    const leaseMs = tool.contract.timeout_ms + deps.leaseMarginMs;
    const claim = await deps.store.claim({
      key,
      argsHash: decision.args_hash,
      owner: deps.executorId,
      leaseMs,
      callId: event.call_id,
      runId: event.run_id,
      tool: tool.ref,
    });
    switch (claim.kind) {
      case "busy":
        return retryLater(`key held by ${claim.owner}`, Math.min(Math.max(claim.retryAfterMs, 50), 5_000));
      case "conflict":
        await publishTerminal(origin, failure(event.call_id, "IDEMPOTENCY_CONFLICT", "this operation was already requested with different arguments"), 1, 0);
        return ACK;
      case "replay": {
        const replayed = { ...claim.result, call_id: event.call_id, replayed: true };
        await publishTerminal(origin, replayed, claim.attempt, 0);
        return ACK;
      }
      case "taken_over": {
        const safeToRepeat = tool.contract.side_effect === "none" || tool.contract.side_effect === "read" || tool.contract.idempotency.kind === "natural";
        if (!safeToRepeat) {
          const result = failure(
            event.call_id,
            "OUTCOME_UNKNOWN",
            `a previous attempt of ${tool.contract.name} stopped before recording its outcome; it will be reconciled, not repeated`,
          );
          if (await deps.store.complete(key, deps.executorId, claim.attempt, result)) await publishTerminal(origin, result, claim.attempt, 0);
          return ACK;
        }
        break;
      }
      case "claimed":
        break;
    }

    const attempt = claim.attempt;
    const started = deps.bus.publish(
      nextCallEvent(origin, "started", "executor", { executor_id: deps.executorId, idempotency_key_hash: keyDigest(key) }, { attempt }),
    );
    // Keep the message ours while a long tool runs.
    const keepAlive = tool.contract.timeout_ms > 5_000 ? setInterval(() => delivery.working(), 5_000) : undefined;
    let run: ToolRun;
    try {
      const context = { callId: event.call_id, runId: event.run_id, principal: decision.principal, context: decision.context, idempotencyKey: key };
      run = await runTool(withLayers(definition), args, context, tool.contract.timeout_ms, deps.shutdown);
    } finally {
      clearInterval(keepAlive);
    }
    const result = await resultOf(run, tool, event, attempt);
    await started;
    if (!(await deps.store.complete(key, deps.executorId, attempt, result))) {
      log.warn({ call_id: event.call_id, attempt }, "fenced out: another executor owns this key now; publishing nothing");
      return ACK;
    }
    // `started` went first on this connection, so the stream stores it before the terminal event.
    await publishTerminal({ ...origin, seq: origin.seq + 1 }, result, attempt, run.durationMs);
    return ACK;
  }

  return async (event: ToolgateEvent, delivery: Delivery): Promise<Disposition> => {
    if (event.kind !== "call" || event.type !== "authorized") return terminate(`executor does not handle ${event.kind}.${event.type}`);
    try {
      return await execute(event, delivery);
    } catch (error) {
      if (delivery.deliveryCount < delivery.maxDeliver) throw error;
      // Last delivery: end the call explicitly rather than leave it without an outcome.
      log.error({ err: error, call_id: event.call_id, deliveries: delivery.deliveryCount }, "giving up on a call after its last delivery");
      await publishTerminal(originOf(event), failure(event.call_id, "EXECUTION_ERROR", "the call could not be executed"), 1, 0);
      return ACK;
    }
  };
}
