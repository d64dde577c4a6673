import { verifyAndConsume, type ApprovalLedger } from "@toolgate/approvals";
import { ACK, retryLater, terminate, type Delivery, type Disposition, type EventBus, type EventHandler, type PublishReceipt } from "@toolgate/bus";
import {
  canonicalHash,
  failure,
  nextCallEvent,
  originOf,
  success,
  type CallEventOf,
  type CallEventOrigin,
  type DecisionVerifier,
  type ResultEnvelope,
  type ToolgateEvent,
} from "@toolgate/contracts";
import type { CompiledTool, ToolRegistry } from "@toolgate/registry";
import type { ClaimOutcome, IdempotencyStore } from "@toolgate/storage";
import type { Logger } from "@toolgate/telemetry";
import type { Collection } from "mongodb";
import { keyDigest, keyFacts } from "./idempotency-key.js";
import { judgeRun, type Evidence, type Judgement } from "./judge-run.js";
import type { LeaseKeeper } from "./lease-keeper.js";
import type { ExecutorMetrics } from "./metrics.js";
import type { OperationTracker } from "./operations.js";
import { decideRetry, retryAfterOf } from "./retry-policy.js";
import type { Downstream, ToolRun } from "./run-tool.js";
import type { UncertainCause } from "./thrown-failure.js";
import type { ToolInvoker } from "./tool-invoker.js";

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

/** A call the executor gave up on: its terminal result is EXECUTION_ERROR and a `dead_lettered` event was published. */
export interface DeadLetterRecord {
  /** The call id: one dead letter per call. */
  _id: string;
  call_id: string;
  run_id: string;
  tool: string;
  reason: string;
  deliveries: number;
  attempt: number;
  executor: string;
  /** The authorized event as JSON text, for an operator to inspect or replay. */
  event_json: string;
  at: Date;
}

export interface ExecutorDeps {
  bus: EventBus;
  /** The contracts in force (the catalog): a decision's exact version is resolved by its hash. */
  contracts: { registry(): ToolRegistry; resolve(hash: string): Promise<CompiledTool | undefined> };
  invoker: ToolInvoker;
  store: IdempotencyStore;
  operations: OperationTracker;
  verifier: DecisionVerifier;
  /** Human approvals: consumed once, by the presentation that runs the approved plan. */
  approvals: ApprovalLedger;
  evidence: Collection<EvidenceRecord>;
  deadLetters: Collection<DeadLetterRecord>;
  executorId: string;
  leaseMarginMs: number;
  /** Keeps the short leases of running attempts alive (see {@link LeaseKeeper}). */
  leases: LeaseKeeper;
  /** The delivery that reaches this count runs no tool: it ends the call. */
  maxDeliveries: number;
  /** Attempts of an idempotent call abandoned by dead executors before it counts as a poison message. */
  maxAbandonedAttempts: number;
  logger: Logger;
  /** Where executions, retries, dead letters, unknown outcomes and key claims are counted. */
  metrics?: Omit<ExecutorMetrics, "reconciliations">;
  now?: () => number;
  random?: () => number;
  sleep?: (ms: number) => Promise<void>;
}

type Authorized = CallEventOf<"authorized">;

/** A read that ran before its key was claimed: its run, its judgement, and its `started` on the way. */
interface UnclaimedRead {
  run: ToolRun;
  judged: Judgement;
  startedEvent: ToolgateEvent;
  started: Promise<boolean>;
}

/** How an attempt ends: its stored result and what its terminal event carries. */
interface Ending {
  result: ResultEnvelope;
  /** How long the tool ran. */
  durationMs: number;
  /** The operation the result names, announced once the terminal event is out. */
  operationId?: string | undefined;
  downstream?: Downstream | undefined;
  /** What must be in the stream before the terminal event (a read's `started`). */
  beforePublish?: () => Promise<void>;
  /**
   * What went out on this connection before the terminal event and is settled alongside it, not waited for
   * first (the `started` of a read that ran before its key was claimed): see `runUnclaimed`.
   */
  alongside?: () => Promise<void>;
}

/** First wait before a delivery that found its key held by another attempt looks again; doubles per delivery. */
const BUSY_RECHECK_MS = 200;
/** When a delivery fenced out of its attempt is looked at again (see `fencedOut`). */
const FENCED_RECHECK_MS = 1_000;
type Owned = Extract<ClaimOutcome, { kind: "claimed" | "taken_over" }>;

/** Where the operator-facing details of an attempt's failure are stored. */
function evidenceRefOf(callId: string, attempt: number): string {
  return `evd_${callId.slice(5)}_${attempt}`;
}

/** Why an authorization is refused before anything runs. */
function refusal(event: Authorized, verifier: DecisionVerifier): CallEventOf<"refused">["payload"]["reason"] | undefined {
  const { decision, signature, arguments: args } = event.payload;
  const signatureProblem = verifier.check(decision, signature);
  if (signatureProblem) return signatureProblem;
  if (decision.call_id !== event.call_id || decision.run_id !== event.run_id) return "decision_for_another_call";
  if (event.tool && event.tool.hash !== decision.tool.hash) return "envelope_tool_mismatch";
  if (canonicalHash(args) !== decision.args_hash) return "arguments_not_bound";
  return undefined;
}

const REFUSAL_DETAIL: Record<CallEventOf<"refused">["payload"]["reason"], string> = {
  unknown_key: "the decision is signed by a key this executor does not trust",
  bad_signature: "the decision's signature does not verify",
  decision_for_another_call: "the decision was issued for another call",
  envelope_tool_mismatch: "the event names another contract than the decision",
  arguments_not_bound: "the arguments are not the ones the decision was signed for",
  approval_invalid: "the approval does not match the call",
};

/**
 * Executes each signed `authorized` call at most once per idempotency key and publishes exactly one terminal
 * event for it. Claims are fenced: an executor whose attempt was taken over publishes nothing. Retryable
 * failures are retried through the stream (the redelivery delay is the backoff), an unknown outcome is
 * reconciled through the tool's status check, and a call whose deliveries run out is dead-lettered. A writing
 * tool runs only after the stream acknowledged its attempt's `started`; a read's `started` is written behind, and on
 * its first delivery a read runs before its key is claimed, which is then claimed with its result (one write,
 * alongside the publish of its answer when the key is the call's own).
 *
 * Sequence numbers: after `authorized` (seq s), attempt a's `started` is s + 2a - 1 and its end s + 2a.
 */
export function executorHandler(deps: ExecutorDeps): EventHandler {
  const now = deps.now ?? Date.now;
  const random = deps.random ?? Math.random;
  const sleep = deps.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  const log = deps.logger;

  async function publishTerminal(
    origin: CallEventOrigin,
    result: ResultEnvelope,
    attempt: number,
    seq: number,
    durationMs: number,
    downstream?: Downstream,
  ): Promise<void> {
    const at = { ...origin, seq: seq - 1 };
    const event =
      !result.ok && result.error.code === "OUTCOME_UNKNOWN"
        ? nextCallEvent(at, "outcome_unknown", "executor", { result, duration_ms: durationMs }, { attempt })
        : nextCallEvent(at, "completed", "executor", { result, duration_ms: durationMs, ...(downstream ? { downstream } : {}) }, { attempt });
    await deps.bus.publish(event);
  }

  async function recordEvidence(ref: string, callId: string, tool: string, attempt: number, evidence: Evidence): Promise<void> {
    await deps.evidence
      .insertOne({ _id: ref, call_id: callId, tool, attempt, executor: deps.executorId, kind: evidence.kind, detail: evidence.detail, at: new Date() })
      .catch((error: unknown) => {
        // A redelivered attempt stores the same reference again: the first record stands.
        if ((error as { code?: unknown }).code !== 11000) log.warn({ err: error, evidence_ref: ref }, "could not store evidence");
      });
  }

  async function execute(event: Authorized, delivery: Delivery): Promise<Disposition> {
    const origin = originOf(event);
    const s = event.seq;
    const callId = event.call_id;
    const reason = refusal(event, deps.verifier);
    if (reason) {
      log.warn({ call_id: callId, run_id: event.run_id, reason, stream_seq: delivery.streamSeq }, "authorization refused");
      // Nothing runs. The call still ends (its caller, and any lock held for it, must not wait forever).
      await deps.bus.publish(nextCallEvent(origin, "refused", "executor", { reason, detail: REFUSAL_DETAIL[reason] }));
      await publishTerminal(origin, failure(callId, "PERMISSION_DENIED", "the authorization for this call could not be verified; nothing ran"), 1, s + 2, 0);
      return ACK;
    }
    const { decision, arguments: args } = event.payload;
    const tool = await deps.contracts.resolve(decision.tool.hash);
    if (!tool || tool.contract.name !== decision.tool.name || !tool.contract.enabled) {
      // Never act on a contract other than the one the call was validated against.
      await publishTerminal(
        origin,
        failure(callId, "TOOL_DISABLED", `${decision.tool.name}@${decision.tool.version} is not available on this executor`),
        1,
        s + 2,
        0,
      );
      return ACK;
    }
    // The plan hash is re-computed over what is about to run and the approval consumed once, before anything
    // else touches the call. A redelivery of this message is the same presentation and passes again.
    const approval = await verifyAndConsume(deps.approvals, {
      decision,
      arguments: args,
      approvalRule: tool.contract.approval,
      resources: tool.resources(args),
      presentation: `stream:${delivery.streamSeq}`,
      consumer: deps.executorId,
      now: new Date(now()),
    });
    if (!approval.ok) {
      log.warn({ call_id: callId, run_id: event.run_id, code: approval.code, detail: approval.detail, stream_seq: delivery.streamSeq }, "approval refused");
      await deps.bus.publish(nextCallEvent(origin, "refused", "executor", { reason: "approval_invalid", detail: approval.detail }));
      // When an earlier presentation of this call consumed the approval, that one owns the call's terminal event.
      if (approval.terminal) await publishTerminal(origin, failure(callId, approval.code, approval.message), 1, s + 2, 0);
      return ACK;
    }
    if (Date.parse(decision.expires_at) <= now()) {
      await publishTerminal(origin, failure(callId, "PERMISSION_DENIED", "the authorization expired before the call could run"), 1, s + 2, 0);
      return ACK;
    }
    const unavailable = deps.invoker.refusal(tool);
    if (unavailable !== undefined) {
      log.warn({ call_id: callId, run_id: event.run_id, tool: tool.contract.name, reason: unavailable }, "tool not available");
      await publishTerminal(origin, failure(callId, "TOOL_DISABLED", `${tool.contract.name} is not available at the moment`), 1, s + 2, 0);
      return ACK;
    }

    const key = tool.idempotencyKey(keyFacts(decision), args);
    // The longest an attempt may hold the key; its lease is short and kept alive while it runs.
    const maxLeaseMs = tool.contract.timeout_ms + deps.leaseMarginMs;
    const exhausted = delivery.deliveryCount >= deps.maxDeliveries;
    const request = {
      key,
      argsHash: decision.args_hash,
      owner: deps.executorId,
      leaseMs: deps.leases.leaseFor(maxLeaseMs),
      callId,
      runId: event.run_id,
      tool: tool.ref,
    };
    // A tool without side effects runs on its first delivery before its key is claimed, and the key is then claimed
    // already done: one durable write instead of a claim and a completion. A delivery of the same call racing it (a
    // redelivery) may run it too, which repeats no effect. With a key of this call's own (no business key another
    // call could share) its answer is published alongside that write, not after it: the stream keeps the first
    // `completed` under its event id, so every delivery of the call ends with one answer, and the message is
    // acknowledged only once the key is stored too; nor does it wait for its `started` to be acknowledged (see
    // `landed`). With a business key, the first answer stored is the one every call of the key gives. What cannot
    // be stored as a final answer at once goes on to a claim, and runs no more.
    let read: UnclaimedRead | undefined;
    if (!tool.writes && delivery.deliveryCount === 1 && !exhausted) {
      read = await runUnclaimed(event, tool, key);
      const result = finalResult(read.judged);
      if (result) {
        const downstream = read.run.kind === "returned" ? read.run.answer.downstream : undefined;
        const startedLanded = landed(event, 1, read.startedEvent, read.started);
        if (tool.contract.idempotency.kind !== "keyed") {
          const ending = { result, durationMs: read.run.durationMs, downstream, alongside: startedLanded };
          const [, disposition] = await Promise.all([deps.store.claimDone(request, result), publishEnd(event, 1, ending)]);
          return disposition;
        }
        const ending = { result, durationMs: read.run.durationMs, downstream, beforePublish: startedLanded };
        if (await deps.store.claimDone(request, result)) return publishEnd(event, 1, ending);
      }
    }
    let claim = await deps.store.claim(request);
    const toolLabel = { tool: tool.contract.name };
    // The last delivery cannot come back later: it waits here for the holder to finish or its lease to expire
    // (leases are never renewed past timeout + margin, so the wait is bounded) and then decides.
    const waitUntil = now() + maxLeaseMs + 1_000;
    while (claim.kind === "busy" && exhausted && now() < waitUntil) {
      await sleep(Math.min(Math.max(claim.retryAfterMs, 20), 500));
      claim = await deps.store.claim(request);
    }
    if (claim.kind !== "claimed") deps.metrics?.idempotency.inc({ ...toolLabel, outcome: claim.kind });
    switch (claim.kind) {
      case "busy":
        // The holder usually finishes well before its lease ends: look again soon, then less and less often.
        return retryLater(`key held by ${claim.owner}`, Math.max(20, Math.min(claim.retryAfterMs, BUSY_RECHECK_MS * 2 ** (delivery.deliveryCount - 1))));
      case "conflict":
        await publishTerminal(origin, failure(callId, "IDEMPOTENCY_CONFLICT", "this operation was already requested with different arguments"), 1, s + 2, 0);
        return ACK;
      case "replay": {
        // Worth an operator's attention: a duplicate delivery, a duplicate publish, or one business key used twice.
        log.info(
          { call_id: callId, run_id: event.run_id, tool: tool.contract.name, attempt: claim.attempt, delivery: delivery.deliveryCount },
          "replayed the stored result of a completed key",
        );
        const replayed = { ...claim.result, call_id: callId, replayed: true };
        await publishTerminal(origin, replayed, claim.attempt, s + 2 * claim.attempt, 0);
        // The operation a replayed result names carries on under the call that started it.
        if (claim.result.operation_id !== undefined) await deps.operations.announce(claim.result.operation_id);
        return ACK;
      }
      case "taken_over":
        if (tool.writes && tool.contract.idempotency.kind !== "natural") {
          // The previous attempt may have had its effect: reconcile, never repeat.
          return finishUnknown(event, tool, key, claim, "abandoned", `a previous attempt of ${tool.contract.name} stopped before recording its outcome`, 0);
        }
        if (exhausted) return deadLetter(event, tool, key, claim, delivery, "deliveries exhausted");
        if (claim.abandoned >= deps.maxAbandonedAttempts) {
          return deadLetter(event, tool, key, claim, delivery, `${claim.abandoned} attempts were abandoned by executors that stopped (poison message)`);
        }
        return runAttempt(event, tool, key, claim, delivery);
      case "claimed":
        if (exhausted) return deadLetter(event, tool, key, claim, delivery, "deliveries exhausted");
        return runAttempt(event, tool, key, claim, delivery, claim.attempt === 1 ? read : undefined);
    }
  }

  /** A result a read's key can be claimed with, done: anything else (a retry, evidence to keep) needs the claim first. */
  function finalResult(judged: Judgement): ResultEnvelope | undefined {
    if (judged.kind !== "result" || judged.evidence) return undefined;
    return judged.result.ok || !judged.result.retryable ? judged.result : undefined;
  }

  function startedOf(event: Authorized, attempt: number, key: string): ToolgateEvent {
    return nextCallEvent(
      { ...originOf(event), seq: event.seq + 2 * attempt - 2 },
      "started",
      "executor",
      { executor_id: deps.executorId, idempotency_key_hash: keyDigest(key) },
      { attempt },
    );
  }

  async function invoke(event: Authorized, tool: CompiledTool, key: string): Promise<ToolRun> {
    const { decision, arguments: args } = event.payload;
    const run = await deps.invoker.run(tool, args, {
      callId: event.call_id,
      runId: event.run_id,
      principal: decision.principal,
      context: decision.context,
      idempotencyKey: key,
    });
    deps.metrics?.executions.observe({ tool: tool.contract.name }, run.durationMs / 1_000);
    return run;
  }

  /** Runs a read as attempt 1 of its key before the key is claimed; its `started` goes out first, not awaited. */
  async function runUnclaimed(event: Authorized, tool: CompiledTool, key: string): Promise<UnclaimedRead> {
    const startedEvent = startedOf(event, 1, key);
    const started = deps.bus.publish(startedEvent).then(
      () => true,
      () => false,
    );
    const run = await invoke(event, tool, key);
    return { run, startedEvent, started, judged: judgeRun(run, tool, deps.contracts.registry(), event.call_id, evidenceRefOf(event.call_id, 1)) };
  }

  /**
   * Waits for a `started` published without waiting (a read's), and publishes it again if it was lost (same event
   * id); it never costs the attempt's known result. Awaited before the terminal event is published (`beforePublish`),
   * or alongside it when the terminal event follows it on this connection at once (`alongside`): the server stores
   * one connection's messages to a stream in the order they were sent, so the start is stored first unless it was
   * lost, and a lost one is then stored behind the answer. That order is only given up for a read, which has no
   * effect whose attempt must be on the record before it.
   */
  function landed(event: Authorized, attempt: number, startedEvent: ToolgateEvent, started: Promise<boolean>): () => Promise<void> {
    return async () => {
      if (await started) return;
      await deps.bus
        .publish(startedEvent)
        .catch((error: unknown) => log.warn({ err: error, call_id: event.call_id, run_id: event.run_id, attempt }, "could not publish started"));
    };
  }

  /**
   * Runs an owned attempt, its lease kept alive until its outcome is stored. `read`: the attempt (1) already ran,
   * before its key was claimed.
   */
  async function runAttempt(event: Authorized, tool: CompiledTool, key: string, claim: Owned, delivery: Delivery, read?: UnclaimedRead): Promise<Disposition> {
    const release = deps.leases.hold(key, claim.attempt, tool.contract.timeout_ms + deps.leaseMarginMs);
    try {
      return await runHeldAttempt(event, tool, key, claim, delivery, read);
    } finally {
      release();
    }
  }

  async function runHeldAttempt(
    event: Authorized,
    tool: CompiledTool,
    key: string,
    claim: Owned,
    delivery: Delivery,
    read?: UnclaimedRead,
  ): Promise<Disposition> {
    const { attempt } = claim;
    const origin = originOf(event);
    const s = event.seq;
    const callId = event.call_id;
    const startedEvent = read?.startedEvent ?? startedOf(event, attempt, key);
    let started: Promise<boolean>;
    if (read) {
      started = read.started;
    } else if (tool.writes) {
      // An attempt that may have an effect is on the record before it runs: an executor that dies inside the
      // tool leaves its `started` (executor id, attempt) in the stream. The one awaited publish of a write.
      try {
        await Promise.all([...traceEarlierRetries(event, claim), deps.bus.publish(startedEvent)]);
      } catch (error) {
        return notStarted(event, key, claim, delivery, error);
      }
      started = Promise.resolve(true);
    } else {
      // A read has no effect to account for: not awaited before it runs (pipelining); observed at once so a
      // failure cannot go unhandled.
      started = Promise.all([...traceEarlierRetries(event, claim), deps.bus.publish(startedEvent)]).then(
        () => true,
        () => false,
      );
    }
    const run = read?.run ?? (await invoke(event, tool, key));
    const evidenceRef = evidenceRefOf(callId, attempt);
    const judged = read?.judged ?? judgeRun(run, tool, deps.contracts.registry(), callId, evidenceRef);
    // A read's `started` goes first on this connection, so the stream stores it before whatever ends the attempt;
    // its acknowledgement is awaited only before the next publish (the completion's write does not wait for it).
    const startedLanded = landed(event, attempt, startedEvent, started);
    const end = s + 2 * attempt;
    if (judged.kind !== "result") await startedLanded();
    switch (judged.kind) {
      case "unknown":
        if (judged.evidence) await recordEvidence(evidenceRef, callId, tool.contract.name, attempt, judged.evidence);
        return finishUnknown(event, tool, key, claim, judged.cause, judged.message, run.durationMs, judged.evidence ? evidenceRef : undefined);
      case "accepted": {
        const operationId = await deps.operations.startJob({ event, tool, idempotencyKey: key, attempt, seq: end }, judged.toolOperationId);
        const result = success(callId, { operation_id: operationId, state: "accepted" }, { operation_id: operationId });
        return finish(event, key, attempt, { result, durationMs: run.durationMs, operationId });
      }
      case "result":
        break;
    }
    const { result } = judged;
    if (judged.evidence) await recordEvidence(evidenceRef, callId, tool.contract.name, attempt, judged.evidence);
    if (!result.ok && result.retryable) {
      const decision = decideRetry(
        {
          policy: tool.contract.retry,
          attempt,
          retryable: true,
          ...(retryAfterOf(result.error.details) === undefined ? {} : { retryAfterMs: retryAfterOf(result.error.details)! }),
          elapsedMs: now() - claim.firstClaimAt,
        },
        random,
      );
      // The retry must be able to run on a delivery that is not the last one.
      if (decision.retry && delivery.deliveryCount + 1 < deps.maxDeliveries) {
        await startedLanded();
        const failedAt = now();
        if (!(await deps.store.scheduleRetry(key, deps.executorId, attempt, result, new Date(failedAt + decision.delayMs)))) {
          return fencedOut(event, attempt);
        }
        deps.metrics?.retries.inc({ tool: tool.contract.name, code: result.error.code });
        await deps.bus.publish(
          nextCallEvent(
            { ...origin, seq: end - 1 },
            "retry_scheduled",
            "executor",
            { failed_attempt: attempt, code: result.error.code, delay_ms: decision.delayMs },
            // Stamped when the next attempt's not-before was fixed: no attempt starts before time + delay_ms.
            { attempt, time: new Date(failedAt) },
          ),
        );
        return retryLater(`retrying after ${result.error.code}`, decision.delayMs);
      }
    }
    const downstream = run.kind === "returned" ? run.answer.downstream : undefined;
    return finish(event, key, attempt, { result, durationMs: run.durationMs, downstream, beforePublish: startedLanded });
  }

  /**
   * Publishes again the `retry_scheduled` of every earlier attempt of the key that ended in a retryable failure,
   * as the store recorded it, before this attempt's own events: an attempt whose event was lost (the stream had no
   * leader when its start, and then its retry, were published) still leaves its trace, in order. Each goes under
   * its original event id: where the first publish landed, the stream (within its duplicate window) or audit
   * (by event id) keeps the first. Nothing to do on the first attempt, and after a takeover without retries.
   * The publishes are sent at once, in order, on the connection the attempt's own events follow on.
   */
  function traceEarlierRetries(event: Authorized, claim: Owned): Promise<PublishReceipt>[] {
    const origin = originOf(event);
    return (claim.retried ?? []).map((r) =>
      deps.bus.publish(
        nextCallEvent(
          { ...origin, seq: event.seq + 2 * r.attempt - 1 },
          "retry_scheduled",
          "executor",
          { failed_attempt: r.attempt, code: r.code, delay_ms: Math.max(0, r.notBefore - r.at) },
          { attempt: r.attempt, time: new Date(r.at) },
        ),
      ),
    );
  }

  /**
   * Ends an attempt of a writing tool whose `started` the stream did not acknowledge: the tool did not run, so
   * the attempt is a retryable failure without effect and the next delivery runs the next attempt.
   */
  async function notStarted(event: Authorized, key: string, claim: Owned, delivery: Delivery, error: unknown): Promise<Disposition> {
    const { attempt } = claim;
    const callId = event.call_id;
    log.warn({ err: error, call_id: callId, run_id: event.run_id, attempt }, "the start of a write was not acknowledged; the tool did not run");
    const result = failure(callId, "UPSTREAM_UNAVAILABLE", "the call could not be recorded as started, so it did not run", { retryable: true });
    const delayMs = Math.min(BUSY_RECHECK_MS * 2 ** (delivery.deliveryCount - 1), 5_000);
    const failedAt = now();
    if (!(await deps.store.scheduleRetry(key, deps.executorId, attempt, result, new Date(failedAt + delayMs)))) {
      return fencedOut(event, attempt);
    }
    deps.metrics?.retries.inc({ tool: event.payload.decision.tool.name, code: "UPSTREAM_UNAVAILABLE" });
    // Best effort: the stream may be what is failing. The next attempt's `started` is awaited again.
    await deps.bus
      .publish(
        nextCallEvent(
          { ...originOf(event), seq: event.seq + 2 * attempt - 1 },
          "retry_scheduled",
          "executor",
          { failed_attempt: attempt, code: "UPSTREAM_UNAVAILABLE", delay_ms: delayMs },
          { attempt, time: new Date(failedAt) },
        ),
      )
      .catch((publishError: unknown) => log.warn({ err: publishError, call_id: callId, run_id: event.run_id, attempt }, "could not publish retry_scheduled"));
    return retryLater("the start of the attempt was not acknowledged", delayMs);
  }

  /**
   * An attempt that another executor took over publishes nothing, and does not acknowledge its delivery either:
   * JetStream takes the acknowledgement of any delivery of a message as the message's, so this (older) delivery's
   * would settle the message for the attempt that took over, which may die before it ends the call, and the call
   * would then never be delivered again. Looked at again later instead, the call's key tells: the stored outcome
   * is replayed, a live attempt is waited for, an abandoned one is taken over.
   */
  function fencedOut(event: Authorized, attempt: number): Disposition {
    log.warn({ call_id: event.call_id, run_id: event.run_id, attempt }, "fenced out: another executor owns this key now; publishing nothing");
    return retryLater("fenced out: the attempt that took over settles the call", FENCED_RECHECK_MS);
  }

  /** Completes the key fenced on owner and attempt, then publishes the terminal event (see {@link publishEnd}). */
  async function finish(event: Authorized, key: string, attempt: number, ending: Ending): Promise<Disposition> {
    if (!(await deps.store.complete(key, deps.executorId, attempt, ending.result))) {
      return fencedOut(event, attempt);
    }
    return publishEnd(event, attempt, ending);
  }

  /** Publishes a stored outcome, after what must be in the stream first, and announces its operation. */
  async function publishEnd(event: Authorized, attempt: number, ending: Ending): Promise<Disposition> {
    const { result, durationMs, operationId, downstream, beforePublish, alongside } = ending;
    await beforePublish?.();
    const terminal = publishTerminal(originOf(event), result, attempt, event.seq + 2 * attempt, durationMs, downstream);
    await Promise.all([terminal, alongside?.()]);
    if (!result.ok && result.error.code === "OUTCOME_UNKNOWN") deps.metrics?.unknownOutcomes.inc({ tool: event.payload.decision.tool.name });
    if (operationId !== undefined) await deps.operations.announce(operationId);
    return ACK;
  }

  async function finishUnknown(
    event: Authorized,
    tool: CompiledTool,
    key: string,
    claim: Owned,
    cause: UncertainCause | "abandoned",
    message: string,
    durationMs: number,
    evidenceRef?: string,
  ): Promise<Disposition> {
    // Best effort: the outcome of this attempt is what must reach the stream; a redelivery tries the trace again.
    await Promise.all(traceEarlierRetries(event, claim)).catch((error: unknown) =>
      log.warn({ err: error, call_id: event.call_id, run_id: event.run_id, attempt: claim.attempt }, "could not publish the retries of earlier attempts"),
    );
    const { attempt } = claim;
    const operationId = tool.contract.status_check
      ? await deps.operations.startReconciliation({ event, tool, idempotencyKey: key, attempt, seq: event.seq + 2 * attempt }, cause)
      : undefined;
    const result = failure(
      event.call_id,
      "OUTCOME_UNKNOWN",
      operationId
        ? `${message}; it is being reconciled through its status check (get_operation ${operationId}), never repeated`
        : `${message}; it has no status check, so an operator must reconcile it`,
      { ...(operationId ? { operation_id: operationId } : {}), ...(evidenceRef ? { evidence_ref: evidenceRef } : {}) },
    );
    return finish(event, key, attempt, { result, durationMs, operationId });
  }

  /** Ends a call that must not run again: a poison message, or a delivery with no successor. */
  async function deadLetter(event: Authorized, tool: CompiledTool, key: string, claim: Owned, delivery: Delivery, reason: string): Promise<Disposition> {
    const { attempt } = claim;
    const evidenceRef = evidenceRefOf(event.call_id, attempt);
    log.error(
      { call_id: event.call_id, run_id: event.run_id, tool: tool.contract.name, attempt, deliveries: delivery.deliveryCount, reason },
      "dead-lettering a call",
    );
    await recordEvidence(evidenceRef, event.call_id, tool.contract.name, attempt, {
      kind: "dead_letter",
      detail: { reason, deliveries: delivery.deliveryCount, abandoned: claim.kind === "taken_over" ? claim.abandoned : 0 },
    });
    const result = failure(event.call_id, "EXECUTION_ERROR", `${tool.contract.name} could not be executed and was given up`, { evidence_ref: evidenceRef });
    if (!(await deps.store.complete(key, deps.executorId, attempt, result))) {
      return fencedOut(event, attempt);
    }
    await recordDeadLetter(event, tool.contract.name, reason, delivery.deliveryCount, attempt);
    deps.metrics?.deadLetters.inc({ tool: tool.contract.name });
    await deps.bus.publish(
      nextCallEvent(
        { ...originOf(event), seq: event.seq + 2 * attempt - 2 },
        "dead_lettered",
        "executor",
        { reason, deliveries: delivery.deliveryCount },
        { attempt },
      ),
    );
    await publishTerminal(originOf(event), result, attempt, event.seq + 2 * attempt, 0);
    return ACK;
  }

  async function recordDeadLetter(event: Authorized, tool: string, reason: string, deliveries: number, attempt: number): Promise<void> {
    await deps.deadLetters
      .insertOne({
        _id: event.call_id,
        call_id: event.call_id,
        run_id: event.run_id,
        tool,
        reason,
        deliveries,
        attempt,
        executor: deps.executorId,
        event_json: JSON.stringify(event),
        at: new Date(),
      })
      .catch((error: unknown) => {
        if ((error as { code?: unknown }).code !== 11000) throw error;
      });
  }

  return async (event: ToolgateEvent, delivery: Delivery): Promise<Disposition> => {
    if (event.kind !== "call" || event.type !== "authorized") return terminate(`executor does not handle ${event.kind}.${event.type}`);
    // The bus tells the server within its ack wait that the call is still being worked on (a long tool, a wait).
    try {
      return await execute(event, delivery);
    } catch (error) {
      if (delivery.deliveryCount < deps.maxDeliveries) throw error;
      // The last delivery failed too (the store or the bus kept failing, or a bug): end the call explicitly.
      log.error(
        { err: error, call_id: event.call_id, run_id: event.run_id, deliveries: delivery.deliveryCount },
        "giving up on a call after its last delivery",
      );
      const reason = "the executor failed on every delivery";
      await recordDeadLetter(event, event.payload.decision.tool.name, reason, delivery.deliveryCount, 1);
      deps.metrics?.deadLetters.inc({ tool: event.payload.decision.tool.name });
      await deps.bus.publish(nextCallEvent(originOf(event), "dead_lettered", "executor", { reason, deliveries: delivery.deliveryCount }));
      await publishTerminal(originOf(event), failure(event.call_id, "EXECUTION_ERROR", "the call could not be executed"), 1, event.seq + 2, 0);
      return ACK;
    }
  };
}
