import { approvalIdFor, planHash, type ApprovalDecisionRecord, type ApprovalRequestRecord, type MongoApprovalStore } from "@toolgate/approvals";
import type { EventBus } from "@toolgate/bus";
import {
  canonicalJson,
  failure,
  isBudgetStop,
  nextCallEvent,
  originOf,
  type CallEventOf,
  type CallEventOrigin,
  type Decision,
  type DecisionSigner,
  type JsonValue,
  type Principal,
  type RunStopReason,
} from "@toolgate/contracts";
import type { CompiledTool, CurrentContracts } from "@toolgate/registry";
import { stepKey, type Logger, type RunTraces } from "@toolgate/telemetry";
import { authorizeApproval, authorizeCall } from "./authorization.js";
import type { CedarPolicies } from "./cedar-policies.js";
import { deniedMessage } from "./decide.js";
import { argumentWarnings } from "./redaction.js";

/** An approval request as approvers see it: arguments redacted where the contract marks them sensitive. */
export interface ApprovalView {
  approval_id: string;
  call_id: string;
  run_id: string;
  state: "pending" | "approved" | "denied" | "expired" | "revoked" | "withdrawn";
  tool: { name: string; version: string; hash: string };
  risk: string;
  side_effect: string;
  requester: { tenant: string; subject: string };
  arguments: Record<string, JsonValue>;
  /** Strings an approver should look at twice (not NFC, invisible characters). */
  warnings: string[];
  plan_hash: string;
  args_hash: string;
  reasons: string[];
  taint: { tainted: boolean; sources: string[] };
  requested_at: string;
  expires_at: string;
  decided_at?: string;
  approver?: { tenant: string; subject: string };
}

/** Why an approver's request was refused; `status` is the HTTP status. */
export interface DeskRefusal {
  status: 400 | 403 | 404 | 409 | 410;
  code:
    | "APPROVAL_NOT_FOUND"
    | "NOT_AN_APPROVER"
    | "SELF_APPROVAL"
    | "APPROVAL_MISMATCH"
    | "ALREADY_DECIDED"
    | "APPROVAL_EXPIRED"
    | "CONTRACT_CHANGED"
    | "POLICY_DENIES";
  message: string;
  details?: Record<string, JsonValue>;
}

export type DeskOutcome = { ok: true; approval: ApprovalView } | { ok: false; refusal: DeskRefusal };

export interface ApprovalDeskDeps {
  store: MongoApprovalStore;
  bus: EventBus;
  contracts: CurrentContracts;
  policies: () => CedarPolicies;
  signer: DecisionSigner;
  /** How long a request waits for a human before it expires (APPROVAL_EXPIRED). */
  requestTtlMs: number;
  /** How long the authorization an approval produces stays usable (the short-lived, one-time token). */
  grantTtlMs: number;
  logger: Logger;
  now?: () => Date;
  /** With spans: each decision's events are published in an `approval_wait` span, from request to decision. */
  traces?: RunTraces | undefined;
}

const NOT_FOUND: DeskRefusal = { status: 404, code: "APPROVAL_NOT_FOUND", message: "no such approval request" };
const samePrincipal = (a: Pick<Principal, "tenant" | "subject">, b: Pick<Principal, "tenant" | "subject">) => a.tenant === b.tenant && a.subject === b.subject;

/**
 * Approvals on policy's side: opens a stored request with an expiry when a call needs a human, lets an
 * authenticated approver who holds the right (Cedar action `approve`) and is not the requester approve or deny
 * it, expires requests nobody decided, and publishes the outcome: `approval_granted` + a signed `authorized`
 * bound to the plan hash, or a terminal `denied` (APPROVAL_DENIED / APPROVAL_EXPIRED). The first decision wins
 * on every replica (a unique insert); publishing is idempotent (deterministic event ids), so any replica may
 * finish publishing a decision another one recorded.
 */
export class ApprovalDesk {
  readonly #deps: ApprovalDeskDeps;
  readonly #now: () => Date;

  constructor(deps: ApprovalDeskDeps) {
    this.#deps = deps;
    this.#now = deps.now ?? (() => new Date());
  }

  /** Stores the request of a call that needs approval and publishes `approval_requested` (again, on a redelivery). */
  async open(
    proposal: CallEventOf<"proposed">,
    verdict: { tool: CompiledTool; arguments: Record<string, JsonValue>; argsHash: string; reasons: string[] },
    policyVersion: string,
  ): Promise<ApprovalRequestRecord> {
    const now = this.#now();
    const { contract } = verdict.tool;
    const request: ApprovalRequestRecord = {
      _id: approvalIdFor(proposal.call_id),
      call_id: proposal.call_id,
      run_id: proposal.run_id,
      tenant: proposal.principal.tenant,
      requester: proposal.principal,
      tool: verdict.tool.ref,
      risk: contract.risk,
      side_effect: contract.side_effect,
      arguments_json: canonicalJson(verdict.arguments),
      args_hash: verdict.argsHash,
      plan_hash: planHash({
        tool: verdict.tool.ref,
        arguments: verdict.arguments,
        principal: proposal.principal,
        resources: verdict.tool.resources(verdict.arguments),
      }),
      context: proposal.payload.context,
      taint: proposal.payload.taint ?? { tainted: false, sources: [] },
      reasons: verdict.reasons,
      policy_version: policyVersion,
      event_seq: proposal.seq + 1,
      requested_at: now,
      expires_at: new Date(now.getTime() + this.#deps.requestTtlMs),
      status: "open",
    };
    const { record } = await this.#deps.store.request(request);
    // A cancel of the call that reached policy before this request was stored left its withdrawal: read after the
    // request is stored, as `withdrawCall` reads the request after it records the withdrawal, so one of them sees
    // the other and the call ends either way.
    const withdrawn = await this.#deps.store.getDecision(record._id);
    await this.#deps.bus.publish(
      nextCallEvent(
        originOf(proposal),
        "approval_requested",
        "policy",
        { approval_id: record._id, plan_hash: record.plan_hash, expires_at: record.expires_at.toISOString() },
        { tool: record.tool, args_hash: record.args_hash, time: record.requested_at },
      ),
    );
    this.#deps.logger.info(
      {
        call_id: record.call_id,
        run_id: record.run_id,
        approval_id: record._id,
        plan_hash: record.plan_hash,
        reasons: record.reasons,
        policy_version: policyVersion,
      },
      "approval requested",
    );
    if (withdrawn?.outcome === "withdrawn") await this.#publish(record, withdrawn);
    return record;
  }

  /** Pending requests of the approver's tenant that it may decide (never its own), oldest expiry first. */
  async list(approver: Principal, filter: { callId?: string } = {}): Promise<ApprovalView[]> {
    const now = this.#now();
    const open = await this.#deps.store.openRequests({ tenant: approver.tenant, ...(filter.callId ? { callId: filter.callId } : {}) }, 500);
    const decided = await this.#deps.store.decisionsOf(open.map((r) => r._id));
    const views: ApprovalView[] = [];
    for (const request of open) {
      if (decided.has(request._id) || request.expires_at <= now || samePrincipal(approver, request.requester)) continue;
      if (this.#mayApprove(approver, request, now, false) !== undefined) continue;
      views.push(this.#view(request, undefined));
    }
    return views.slice(0, 200);
  }

  /**
   * How many requests wait for a human now (open, undecided, not expired) and when the oldest of them was made:
   * what the approval gauges report. Two reads by equality, like {@link list}'s.
   */
  async pending(): Promise<{ count: number; oldestRequestedAt?: Date }> {
    const now = this.#now();
    const open = await this.#deps.store.openRequests({}, 10_000);
    const decided = await this.#deps.store.decisionsOf(open.map((r) => r._id));
    const waiting = open.filter((r) => !decided.has(r._id) && r.expires_at > now);
    if (waiting.length === 0) return { count: 0 };
    return { count: waiting.length, oldestRequestedAt: new Date(Math.min(...waiting.map((r) => r.requested_at.getTime()))) };
  }

  /** One request, for an approver who may decide it or for its requester; its state included. */
  async get(id: string, caller: Principal): Promise<DeskOutcome> {
    const request = await this.#deps.store.getRequest(id);
    if (!request || request.tenant !== caller.tenant) return { ok: false, refusal: NOT_FOUND };
    if (!samePrincipal(caller, request.requester) && this.#mayApprove(caller, request, this.#now(), false) !== undefined)
      return { ok: false, refusal: NOT_FOUND };
    return { ok: true, approval: this.#view(request, (await this.#deps.store.getDecision(id)) ?? undefined) };
  }

  /**
   * Approves request `id` as `approver`. When `planHash` is given (the one the approver was shown) it must be
   * the request's. On success the call's signed authorization is published, bound to the plan hash.
   */
  async approve(id: string, approver: Principal, body: { planHash?: string; note?: string } = {}): Promise<DeskOutcome> {
    return this.#decide(id, approver, "approved", body);
  }

  /** Denies request `id` as `approver`: the call ends with APPROVAL_DENIED. */
  async deny(id: string, approver: Principal, body: { planHash?: string; note?: string } = {}): Promise<DeskOutcome> {
    return this.#decide(id, approver, "denied", body);
  }

  /**
   * Expires requests nobody decided in time (their calls end with APPROVAL_EXPIRED) and publishes decisions
   * whose events are missing (a replica stopped between recording and publishing). Safe on every replica.
   */
  async sweep(): Promise<{ expired: number; republished: number }> {
    const now = this.#now();
    let expired = 0;
    for (const request of await this.#deps.store.openRequests({ expiredBy: now }, 100)) {
      const { won, decision } = await this.#deps.store.decide({ _id: request._id, call_id: request.call_id, outcome: "expired", decided_at: now });
      if (won) {
        expired += 1;
        await this.#publish(request, decision);
      }
    }
    let republished = 0;
    for (const decision of await this.#deps.store.unpublishedDecisions(new Date(now.getTime() - 2_000), 100)) {
      const request = await this.#deps.store.getRequest(decision._id);
      if (!request) continue;
      await this.#publish(request, decision);
      republished += 1;
    }
    return { expired, republished };
  }

  /**
   * Withdraws the open requests of a run that stopped: nobody can approve them any more, and each call ends now
   * (BUDGET_EXCEEDED when a budget stopped the run, APPROVAL_DENIED otherwise) rather than at its expiry, or
   * worse, running after an approval in a run that no longer continues. A decision that got there first (an
   * approval, a denial, an expiry) stands. Safe to repeat: a redelivered stop finds the requests decided.
   */
  async withdrawRun(runId: string, stopReason: RunStopReason): Promise<number> {
    const now = this.#now();
    let withdrawn = 0;
    for (const request of await this.#deps.store.openRequests({ runId }, 500)) {
      const { won, decision } = await this.#deps.store.decide({
        _id: request._id,
        call_id: request.call_id,
        outcome: "withdrawn",
        reasons: [`approval ${request._id} withdrawn: the run stopped (${stopReason}) before anyone decided`],
        run_stop: stopReason,
        decided_at: now,
      });
      if (!won) continue;
      withdrawn += 1;
      this.#deps.logger.info({ call_id: request.call_id, approval_id: request._id, run_id: runId, stop_reason: stopReason }, "approval withdrawn");
      await this.#publish(request, decision);
    }
    return withdrawn;
  }

  /**
   * Withdraws the approval request of a call its caller cancelled (`cancel_requested`, the orchestrator's): nobody
   * can approve it any more, and the call ends now with APPROVAL_DENIED instead of waiting for an approver or its
   * expiry. A decision that got there first (an approval, a denial, an expiry) stands, and a call that needed no
   * approval is not touched: the cancel does not stop what runs. A request another principal made is left alone.
   * The withdrawal is recorded before the request is read, so a request stored meanwhile ({@link open}) is
   * withdrawn too. Safe to repeat. Returns whether this call withdrew an open request.
   */
  async withdrawCall(callId: string, by: Pick<Principal, "tenant" | "subject">, reason: string): Promise<boolean> {
    const id = approvalIdFor(callId);
    const existing = await this.#deps.store.getRequest(id);
    if (existing && !samePrincipal(existing.requester, by)) {
      this.#deps.logger.warn({ call_id: callId, approval_id: id }, "cancel of another principal's call ignored");
      return false;
    }
    const { won, decision } = await this.#deps.store.decide({
      _id: id,
      call_id: callId,
      outcome: "withdrawn",
      reasons: [`approval ${id} withdrawn: ${reason}`.slice(0, 512)],
      decided_at: this.#now(),
    });
    if (!won) return false;
    const request = existing ?? (await this.#deps.store.getRequest(id));
    if (!request) {
      // No request (yet): nothing to publish now. `open` publishes the withdrawal if the request comes after all.
      await this.#deps.store.markPublished(id, this.#now());
      return false;
    }
    this.#deps.logger.info({ call_id: callId, approval_id: id, run_id: request.run_id }, "approval withdrawn: call cancelled");
    await this.#publish(request, decision);
    return true;
  }

  async #decide(id: string, approver: Principal, outcome: "approved" | "denied", body: { planHash?: string; note?: string }): Promise<DeskOutcome> {
    const now = this.#now();
    const request = await this.#deps.store.getRequest(id);
    // Another tenant's request looks exactly like a missing one.
    if (!request || request.tenant !== approver.tenant) return { ok: false, refusal: NOT_FOUND };
    if (samePrincipal(approver, request.requester)) {
      return { ok: false, refusal: { status: 403, code: "SELF_APPROVAL", message: "a call cannot be approved or denied by the principal that made it" } };
    }
    const refusal = this.#mayApprove(approver, request, now);
    if (refusal) return { ok: false, refusal };
    if (body.planHash !== undefined && body.planHash !== request.plan_hash) {
      return {
        ok: false,
        refusal: {
          status: 409,
          code: "APPROVAL_MISMATCH",
          message: "the plan hash you were shown is not this request's",
          details: { plan_hash: request.plan_hash },
        },
      };
    }
    const existing = await this.#deps.store.getDecision(id);
    if (existing) return { ok: false, refusal: decidedRefusal(existing) };
    if (now >= request.expires_at) {
      const expiry = await this.#deps.store.decide({ _id: id, call_id: request.call_id, outcome: "expired", decided_at: now });
      if (expiry.won) await this.#publish(request, expiry.decision);
      return { ok: false, refusal: decidedRefusal(expiry.decision) };
    }
    // The call is authorized again under the policy in force now: an approval cannot resurrect a call that policy
    // stopped allowing while it waited (a revoked role, a removed task member).
    const policies = this.#deps.policies();
    const recheck = outcome === "approved" ? this.#recheck(policies, request, now) : undefined;
    const note = body.note?.slice(0, 400);
    const record: Omit<ApprovalDecisionRecord, "status"> = {
      _id: id,
      call_id: request.call_id,
      outcome: recheck ? "revoked" : outcome,
      approver: { tenant: approver.tenant, subject: approver.subject, roles: approver.roles },
      ...(note ? { note } : {}),
      ...(recheck ? { reasons: recheck, policy_version: policies.version } : {}),
      decided_at: now,
      ...(outcome === "approved" && !recheck ? { grant_expires_at: new Date(now.getTime() + this.#deps.grantTtlMs) } : {}),
    };
    const { won, decision } = await this.#deps.store.decide(record);
    if (!won) return { ok: false, refusal: decidedRefusal(decision) };
    if (recheck) {
      await this.#publish(request, decision);
      return {
        ok: false,
        refusal: { status: 409, code: "POLICY_DENIES", message: "the policy in force no longer allows this call; it was ended with PERMISSION_DENIED" },
      };
    }
    this.#deps.logger.info(
      {
        call_id: request.call_id,
        run_id: request.run_id,
        approval_id: id,
        outcome,
        approver: `${approver.tenant}/${approver.subject}`,
        plan_hash: request.plan_hash,
      },
      "approval decided",
    );
    await this.#publish(request, decision);
    return { ok: true, approval: this.#view(request, decision) };
  }

  /** Undefined when the policy in force still allows the call (possibly with this approval); otherwise its reasons. */
  #recheck(policies: CedarPolicies, request: ApprovalRequestRecord, now: Date): string[] | undefined {
    const tool = this.#deps.contracts.registry().getByHash(request.tool.hash)!;
    const authorization = authorizeCall(policies, {
      principal: request.requester,
      tool,
      arguments: JSON.parse(request.arguments_json) as Record<string, JsonValue>,
      context: request.context,
      taint: request.taint,
      now,
    });
    if (authorization.kind !== "deny") return undefined;
    this.#deps.logger.warn(
      { call_id: request.call_id, run_id: request.run_id, approval_id: request._id, reasons: authorization.reasons },
      "approved call no longer allowed by policy",
    );
    return authorization.reasons;
  }

  /** Undefined when `approver` may decide `request`; otherwise why not. */
  #mayApprove(approver: Principal, request: ApprovalRequestRecord, now: Date, log = true): DeskRefusal | undefined {
    const tool = this.#deps.contracts.registry().getByHash(request.tool.hash);
    if (!tool) {
      return { status: 409, code: "CONTRACT_CHANGED", message: "the tool's contract changed since the call was proposed; it can no longer be approved" };
    }
    const check = authorizeApproval(this.#deps.policies(), { approver, requester: request.requester, tool, tainted: request.taint.tainted, now });
    if (check.allowed) return undefined;
    if (log)
      this.#deps.logger.info(
        {
          call_id: request.call_id,
          run_id: request.run_id,
          approval_id: request._id,
          approver: `${approver.tenant}/${approver.subject}`,
          reasons: check.reasons,
        },
        "approver lacks the right",
      );
    return { status: 403, code: "NOT_AN_APPROVER", message: "you do not hold the right to approve this call" };
  }

  /**
   * Publishes what a decision produces; idempotent (same event ids, same signed decision), then marks it published.
   * With spans, inside the call's `approval_wait` span (requested → decided), a child of the call's proposal.
   */
  async #publish(request: ApprovalRequestRecord, decision: ApprovalDecisionRecord): Promise<void> {
    const traces = this.#deps.traces;
    if (!traces) return this.#publishDecision(request, decision);
    const span = traces.start(
      "approval_wait",
      {
        startTime: request.requested_at,
        attributes: {
          "toolgate.step": "approval_wait",
          "toolgate.run_id": request.run_id,
          "toolgate.call_id": request.call_id,
          "toolgate.approval_id": request._id,
          "toolgate.approval.outcome": decision.outcome,
          "gen_ai.tool.name": request.tool.name,
          "toolgate.schema_version": request.tool.version,
        },
      },
      traces.callContext(request.run_id, request.call_id),
    );
    return traces.within(stepKey("call", request.call_id), span, () => this.#publishDecision(request, decision)).finally(() => span.end());
  }

  async #publishDecision(request: ApprovalRequestRecord, decision: ApprovalDecisionRecord): Promise<void> {
    const origin: CallEventOrigin = {
      call_id: request.call_id,
      run_id: request.run_id,
      principal: request.requester,
      seq: request.event_seq,
      tool: request.tool,
      args_hash: request.args_hash,
    };
    const at = decision.decided_at;
    if (decision.outcome === "approved") {
      const approver = decision.approver!;
      await this.#deps.bus.publish(
        nextCallEvent(origin, "approval_granted", "policy", { approval_id: request._id, plan_hash: request.plan_hash, approver }, { time: at }),
      );
      const signed: Decision = {
        decision_id: `dec_${request.call_id.slice(5)}`,
        call_id: request.call_id,
        run_id: request.run_id,
        tool: request.tool,
        args_hash: request.args_hash,
        principal: request.requester,
        context: request.context,
        policy_version: request.policy_version,
        issued_at: at.toISOString(),
        expires_at: decision.grant_expires_at!.toISOString(),
        key_id: this.#deps.signer.keyId,
        approval: { approval_id: request._id, plan_hash: request.plan_hash },
      };
      const args = JSON.parse(request.arguments_json) as Record<string, JsonValue>;
      await this.#deps.bus.publish(
        nextCallEvent(
          { ...origin, seq: origin.seq + 1 },
          "authorized",
          "policy",
          { decision: signed, signature: this.#deps.signer.sign(signed), arguments: args },
          { time: at },
        ),
      );
    } else if (decision.outcome === "revoked") {
      const result = failure(request.call_id, "PERMISSION_DENIED", deniedMessage(request.tool.name));
      const reasons = (decision.reasons ?? []).map((r) => `at approval: ${r}`.slice(0, 512));
      await this.#deps.bus.publish(
        nextCallEvent(origin, "denied", "policy", { result, reasons, policy_version: decision.policy_version ?? request.policy_version }, { time: at }),
      );
    } else if (decision.outcome === "withdrawn") {
      const code = decision.run_stop !== undefined && isBudgetStop(decision.run_stop) ? "BUDGET_EXCEEDED" : "APPROVAL_DENIED";
      await this.#deps.bus.publish(
        nextCallEvent(
          origin,
          "denied",
          "policy",
          {
            result: failure(
              request.call_id,
              code,
              decision.run_stop === undefined
                ? "the call was cancelled before anyone approved it; it did not run"
                : "the run stopped before anyone approved this call; it did not run",
            ),
            reasons: decision.reasons ?? [],
            policy_version: request.policy_version,
          },
          { time: at },
        ),
      );
    } else {
      const code = decision.outcome === "denied" ? "APPROVAL_DENIED" : "APPROVAL_EXPIRED";
      const reasons =
        decision.outcome === "denied"
          ? [
              `approval ${request._id} denied by ${decision.approver!.tenant}/${decision.approver!.subject}${decision.note ? `: ${decision.note}` : ""}`.slice(
                0,
                512,
              ),
            ]
          : [`approval ${request._id} expired at ${request.expires_at.toISOString()} without a decision`];
      const message =
        decision.outcome === "denied" ? "a human approver refused this call; it did not run" : "nobody approved this call in time; it did not run";
      await this.#deps.bus.publish(
        nextCallEvent(
          origin,
          "denied",
          "policy",
          { result: failure(request.call_id, code, message), reasons, policy_version: request.policy_version },
          { time: at },
        ),
      );
    }
    await this.#deps.store.markPublished(request._id, this.#now());
  }

  #view(request: ApprovalRequestRecord, decision: ApprovalDecisionRecord | undefined): ApprovalView {
    const args = JSON.parse(request.arguments_json) as Record<string, JsonValue>;
    const tool = this.#deps.contracts.registry().getByHash(request.tool.hash);
    const state = decision ? decision.outcome : request.expires_at <= this.#now() ? "expired" : "pending";
    return {
      approval_id: request._id,
      call_id: request.call_id,
      run_id: request.run_id,
      state,
      tool: request.tool,
      risk: request.risk,
      side_effect: request.side_effect,
      requester: { tenant: request.requester.tenant, subject: request.requester.subject },
      // Unknown contract (changed since): nothing can be known to be safe to show. Warnings name places, not values.
      arguments: tool ? tool.redactArguments(args) : {},
      warnings: argumentWarnings(tool ? tool.redactArguments(args) : args),
      plan_hash: request.plan_hash,
      args_hash: request.args_hash,
      reasons: request.reasons,
      taint: request.taint,
      requested_at: request.requested_at.toISOString(),
      expires_at: request.expires_at.toISOString(),
      ...(decision ? { decided_at: decision.decided_at.toISOString() } : {}),
      ...(decision?.approver ? { approver: { tenant: decision.approver.tenant, subject: decision.approver.subject } } : {}),
    };
  }
}

function decidedRefusal(decision: ApprovalDecisionRecord): DeskRefusal {
  return decision.outcome === "expired"
    ? { status: 410, code: "APPROVAL_EXPIRED", message: "the request expired before anyone decided it" }
    : {
        status: 409,
        code: "ALREADY_DECIDED",
        message:
          decision.outcome === "withdrawn"
            ? `the request was withdrawn (${decision.run_stop === undefined ? "its call was cancelled" : "its run stopped"}); its call will not run`
            : `the request was already ${decision.outcome}`,
        details: { outcome: decision.outcome },
      };
}
