import type { Decision, JsonValue } from "@toolgate/contracts";
import type { ApprovalConsumptionRecord, ApprovalDecisionRecord, ApprovalFailureCode, ApprovalRequestRecord } from "./approval-store.js";
import type { ResourceRef } from "@toolgate/registry";
import { planHash } from "./plan-hash.js";

/** The reads and the one insert {@link verifyAndConsume} needs (implemented by `MongoApprovalStore`). */
export interface ApprovalLedger {
  getRequest(id: string): Promise<ApprovalRequestRecord | null>;
  getDecision(id: string): Promise<ApprovalDecisionRecord | null>;
  getConsumption(id: string): Promise<ApprovalConsumptionRecord | null>;
  consume(record: ApprovalConsumptionRecord): Promise<{ first: boolean; consumption: ApprovalConsumptionRecord }>;
}

export interface ApprovalPresentation {
  /** The signed decision (its signature already verified by the caller). */
  decision: Decision;
  /** The arguments about to run. */
  arguments: Record<string, JsonValue>;
  /** The contract's approval rule. */
  approvalRule: "never" | "always" | "when_tainted";
  /** The resources the arguments about to run name (`CompiledTool.resources`). */
  resources: readonly ResourceRef[];
  /**
   * Identity of this presentation, stable across redeliveries of one message and different for any other
   * message: `stream:<sequence>` of the JetStream message that carried the authorization.
   */
  presentation: string;
  /** Who checks (the executor instance), for the record. */
  consumer: string;
  now: Date;
}

/** The result of {@link verifyAndConsume}. */
export type ApprovalCheck =
  /** Run the call: no approval was needed (`none`), or this presentation consumed it (`consumed`, also on its redeliveries). */
  | { ok: true; approval: "none" | "consumed" }
  /**
   * Run nothing. `message` is for the model (the result envelope), `detail` for the `refused` event, beginning
   * with the code. `terminal` is false only when an earlier presentation of the same call consumed the approval:
   * that presentation owns the call's one terminal event, so this one publishes `refused` and nothing else.
   */
  | { ok: false; code: ApprovalFailureCode; message: string; detail: string; terminal: boolean };

const MESSAGES: Record<ApprovalFailureCode, string> = {
  APPROVAL_REQUIRED: "this call needs a human approval and has none; nothing ran",
  APPROVAL_DENIED: "the approver refused this call; nothing ran",
  APPROVAL_EXPIRED: "the approval expired before the call could run; nothing ran",
  APPROVAL_MISMATCH: "the approval was given for another call or other arguments; nothing ran",
  APPROVAL_CONSUMED: "the approval was already used; nothing ran",
};

function fail(code: ApprovalFailureCode, why: string, terminal = true): ApprovalCheck {
  return { ok: false, code, message: MESSAGES[code], detail: `${code}: ${why}`.slice(0, 512), terminal };
}

type Verdict = { ok: true } | { ok: false; code: ApprovalFailureCode; why: string };

/**
 * The executor's approval check, run before anything else touches the call: re-computes the plan hash over
 * what is about to run, checks the stored request and decision, and consumes the approval with a unique
 * insert (atomic on MongoDB and FerretDB). An approval is good for one presentation of one call: a redelivery
 * of that presentation passes again; any other presentation — a replay, another call, other arguments, after
 * expiry — fails with its own code. The first presentation consumes the approval even when it fails (fail
 * closed). Calls whose decision carries no approval pass without I/O unless their contract always requires one.
 * Throws only when the store fails (retryable: the caller redelivers).
 */
export async function verifyAndConsume(ledger: ApprovalLedger, input: ApprovalPresentation): Promise<ApprovalCheck> {
  const { decision } = input;
  const approval = decision.approval;
  if (approval === undefined) {
    return input.approvalRule === "always"
      ? fail("APPROVAL_REQUIRED", `the contract of ${decision.tool.name} always requires an approval and the decision carries none`)
      : { ok: true, approval: "none" };
  }
  const id = approval.approval_id;
  const earlier = await ledger.getConsumption(id);
  // A redelivery of the presentation that consumed the approval gets the same answer, whatever the time now.
  if (earlier && earlier.presentation === input.presentation) return replayOutcome(earlier);

  const verdict = await evaluate(ledger, input);
  if (earlier) return afterEarlier(verdict, earlier, decision.call_id);
  const { first, consumption } = await ledger.consume({
    _id: id,
    call_id: decision.call_id,
    presentation: input.presentation,
    outcome: verdict.ok ? "ok" : verdict.code,
    consumer: input.consumer,
    at: input.now,
  });
  if (!first) {
    // Another presentation got there first, possibly at the same moment on another executor.
    if (consumption.presentation === input.presentation) return replayOutcome(consumption);
    return afterEarlier(verdict, consumption, decision.call_id);
  }
  return verdict.ok ? { ok: true, approval: "consumed" } : fail(verdict.code, verdict.why);
}

function replayOutcome(consumption: ApprovalConsumptionRecord): ApprovalCheck {
  return consumption.outcome === "ok" ? { ok: true, approval: "consumed" } : fail(consumption.outcome, "this presentation was refused before");
}

/**
 * This presentation comes after another one consumed the approval. When that one was of the same call, it owns
 * the call's terminal event; otherwise this call ends here.
 */
function afterEarlier(verdict: Verdict, earlier: ApprovalConsumptionRecord, callId: string): ApprovalCheck {
  const terminal = earlier.call_id !== callId;
  // Its own failure says more (another call, other arguments, expired) than "already used".
  if (!verdict.ok) return fail(verdict.code, verdict.why, terminal);
  return fail("APPROVAL_CONSUMED", `the approval was used by an earlier presentation (${earlier.presentation})`, terminal);
}

async function evaluate(ledger: ApprovalLedger, input: ApprovalPresentation): Promise<Verdict> {
  const { decision } = input;
  const approval = decision.approval!;
  const [request, decided] = await Promise.all([ledger.getRequest(approval.approval_id), ledger.getDecision(approval.approval_id)]);
  if (!request) return { ok: false, code: "APPROVAL_MISMATCH", why: "no such approval was requested" };
  if (request.call_id !== decision.call_id || request.run_id !== decision.run_id) {
    return { ok: false, code: "APPROVAL_MISMATCH", why: `the approval was given for call ${request.call_id}, not ${decision.call_id}` };
  }
  if (request.requester.tenant !== decision.principal.tenant || request.requester.subject !== decision.principal.subject) {
    return { ok: false, code: "APPROVAL_MISMATCH", why: "the approval was given to another principal" };
  }
  const recomputed = planHash({ tool: decision.tool, arguments: input.arguments, principal: decision.principal, resources: input.resources });
  if (recomputed !== request.plan_hash || approval.plan_hash !== request.plan_hash) {
    return { ok: false, code: "APPROVAL_MISMATCH", why: "the plan about to run (tool, arguments, principal or resources) is not the approved one" };
  }
  if (!decided) return { ok: false, code: "APPROVAL_REQUIRED", why: "no human has approved this plan" };
  if (decided.outcome === "denied") return { ok: false, code: "APPROVAL_DENIED", why: "the approver refused this plan" };
  if (decided.outcome === "revoked") return { ok: false, code: "APPROVAL_DENIED", why: "the policy in force when it was approved denies this plan" };
  if (decided.outcome === "expired") return { ok: false, code: "APPROVAL_EXPIRED", why: "nobody decided before the request expired" };
  if (decided.outcome === "withdrawn") return { ok: false, code: "APPROVAL_DENIED", why: "the request was withdrawn when its run stopped" };
  const now = input.now.getTime();
  const until = Math.min(decided.grant_expires_at?.getTime() ?? 0, Date.parse(decision.expires_at));
  if (!(now < until)) return { ok: false, code: "APPROVAL_EXPIRED", why: `the approval was good until ${new Date(until).toISOString()}` };
  return { ok: true };
}
