import { ACK, terminate, type Disposition, type EventBus, type EventHandler } from "@toolgate/bus";
import { failure, nextCallEvent, originOf, type CallEvent, type CallEventOf, type DecisionSigner, type ToolgateEvent } from "@toolgate/contracts";
import type { CurrentContracts } from "@toolgate/registry";
import type { Histogram, Logger } from "@toolgate/telemetry";
import type { ApprovalDesk } from "./approval-desk.js";
import type { CedarPolicies } from "./cedar-policies.js";
import { decide, type Verdict } from "./decide.js";
import type { QuotaCounter } from "./quota-counter.js";

export interface PolicyWorkerDeps {
  bus: EventBus;
  contracts: CurrentContracts;
  /** The policy set in force now (it is reloaded while running). */
  policies: () => CedarPolicies;
  signer: DecisionSigner;
  decisionTtlMs: number;
  quotas: QuotaCounter;
  desk: ApprovalDesk;
  logger: Logger;
  now?: () => Date;
  /** Observes each decision's duration, by verdict (`toolgate_policy_decision_duration_seconds`). */
  decisions?: Histogram<"verdict">;
}

/**
 * Applies the quota that matches the principal and the tool to a call policy would let through (or ask a human
 * about): RATE_LIMITED with `retry_after_ms` when the window's calls are used up.
 */
async function withQuota(verdict: Verdict, event: CallEventOf<"proposed">, deps: PolicyWorkerDeps, policies: CedarPolicies, now: Date): Promise<Verdict> {
  if (verdict.kind !== "authorized" && verdict.kind !== "approval_required") return verdict;
  const name = verdict.tool.contract.name;
  const rule = policies.quotas.match(event.principal, name);
  if (!rule) return verdict;
  const key = `${rule.id}:${event.principal.tenant}/${event.principal.subject}:${name}`;
  const taken = await deps.quotas.take(key, rule.limit, rule.window_ms, now.getTime());
  if (taken.ok) return verdict;
  return {
    kind: "denied",
    tool: verdict.tool,
    argsHash: verdict.argsHash,
    reasons: [`quota ${rule.id}: ${rule.limit} calls of ${name} per ${rule.window_ms} ms for ${event.principal.tenant}/${event.principal.subject} used up`],
    result: failure(event.call_id, "RATE_LIMITED", `too many calls of ${name}; retry after ${taken.retryAfterMs} ms`, {
      details: { retry_after_ms: taken.retryAfterMs },
      retryable: true,
    }),
  };
}

/**
 * Turns each `proposed` event into exactly one of `rejected`, `denied`, a signed `authorized`, or (when a human
 * must decide) a stored approval request and `approval_requested`, published before the proposal is
 * acknowledged. Re-processing a redelivered proposal publishes the same event ids.
 */
export function policyHandler(deps: PolicyWorkerDeps): EventHandler {
  const now = deps.now ?? (() => new Date());
  return async (event: ToolgateEvent): Promise<Disposition> => {
    if (event.kind !== "call" || event.type !== "proposed") return terminate(`policy does not handle ${event.kind}.${event.type}`);
    const policies = deps.policies();
    const at = now();
    const started = performance.now();
    const verdict = await withQuota(decide(event, deps.contracts.registry(), policies, at), event, deps, policies, at);
    deps.decisions?.observe({ verdict: verdict.kind }, (performance.now() - started) / 1_000);
    const origin = originOf(event);
    let out: CallEvent;
    switch (verdict.kind) {
      case "rejected":
        out = nextCallEvent(origin, "rejected", "policy", { result: verdict.result, stage: verdict.stage });
        break;
      case "denied":
        out = nextCallEvent(
          origin,
          "denied",
          "policy",
          { result: verdict.result, reasons: verdict.reasons, policy_version: policies.version },
          { tool: verdict.tool.ref, args_hash: verdict.argsHash },
        );
        break;
      case "approval_required":
        await deps.desk.open(event, verdict, policies.version);
        return ACK;
      case "authorized": {
        const decision = {
          decision_id: `dec_${event.call_id.slice(5)}`,
          call_id: event.call_id,
          run_id: event.run_id,
          tool: verdict.tool.ref,
          args_hash: verdict.argsHash,
          principal: event.principal,
          context: event.payload.context,
          policy_version: policies.version,
          issued_at: at.toISOString(),
          expires_at: new Date(at.getTime() + deps.decisionTtlMs).toISOString(),
          key_id: deps.signer.keyId,
        };
        out = nextCallEvent(
          origin,
          "authorized",
          "policy",
          { decision, signature: deps.signer.sign(decision), arguments: verdict.arguments },
          { tool: verdict.tool.ref, args_hash: verdict.argsHash },
        );
        // Every authorization is an audited event; at info the log keeps what was refused, not each call let through.
        deps.logger.debug(
          { call_id: event.call_id, run_id: event.run_id, tool: verdict.tool.contract.name, reasons: verdict.reasons, policy_version: policies.version },
          "authorized",
        );
        break;
      }
    }
    await deps.bus.publish(out);
    if (verdict.kind !== "authorized") {
      deps.logger.info(
        {
          call_id: event.call_id,
          run_id: event.run_id,
          verdict: verdict.kind,
          code: verdict.result.error.code,
          ...(verdict.kind === "denied" ? { reasons: verdict.reasons } : {}),
        },
        "proposal not authorized",
      );
    }
    return ACK;
  };
}
