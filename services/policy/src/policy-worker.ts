import { ACK, terminate, type Disposition, type EventBus, type EventHandler } from "@toolgate/bus";
import { nextCallEvent, originOf, type CallEvent, type DecisionSigner, type ToolgateEvent } from "@toolgate/contracts";
import type { ToolRegistry } from "@toolgate/registry";
import type { Logger } from "@toolgate/telemetry";
import { decide } from "./decide.js";
import type { Grants } from "./grants.js";

export interface PolicyWorkerDeps {
  bus: EventBus;
  registry: ToolRegistry;
  /** The grants in force now (they may be reloaded while running). */
  grants: () => Grants;
  signer: DecisionSigner;
  decisionTtlMs: number;
  logger: Logger;
  now?: () => Date;
}

/**
 * Turns each `proposed` event into exactly one of `rejected`, `denied` or a signed `authorized`, published
 * before the proposal is acknowledged. Re-processing a redelivered proposal publishes the same event id.
 */
export function policyHandler(deps: PolicyWorkerDeps): EventHandler {
  const now = deps.now ?? (() => new Date());
  return async (event: ToolgateEvent): Promise<Disposition> => {
    if (event.kind !== "call" || event.type !== "proposed") return terminate(`policy does not handle ${event.kind}.${event.type}`);
    const grants = deps.grants();
    const verdict = decide(event, deps.registry, grants);
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
          { result: verdict.result, reasons: verdict.reasons, policy_version: grants.version },
          {
            tool: verdict.tool.ref,
            args_hash: verdict.argsHash,
          },
        );
        break;
      case "authorized": {
        const issued = now();
        const decision = {
          decision_id: `dec_${event.call_id.slice(5)}`,
          call_id: event.call_id,
          run_id: event.run_id,
          tool: verdict.tool.ref,
          args_hash: verdict.argsHash,
          principal: event.principal,
          context: event.payload.context,
          policy_version: grants.version,
          issued_at: issued.toISOString(),
          expires_at: new Date(issued.getTime() + deps.decisionTtlMs).toISOString(),
          key_id: deps.signer.keyId,
        };
        out = nextCallEvent(
          origin,
          "authorized",
          "policy",
          { decision, signature: deps.signer.sign(decision), arguments: verdict.arguments },
          {
            tool: verdict.tool.ref,
            args_hash: verdict.argsHash,
          },
        );
        break;
      }
    }
    await deps.bus.publish(out);
    deps.logger.debug({ call_id: event.call_id, verdict: verdict.kind }, "proposal decided");
    return ACK;
  };
}
