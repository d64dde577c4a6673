import { sha256, type Decision } from "@toolgate/contracts";
import type { KeyFacts } from "@toolgate/registry";

/** The trusted facts of an authorized call that a contract's key template may name (`CompiledTool.idempotencyKey`). */
export function keyFacts(decision: Decision): KeyFacts {
  return {
    run_id: decision.run_id,
    call_id: decision.call_id,
    tenant: decision.principal.tenant,
    subject: decision.principal.subject,
    task_id: decision.context.task_id,
    args_hash: decision.args_hash,
  };
}

/** Short digest of a key for events and logs: keys may embed argument values. */
export function keyDigest(key: string): string {
  return sha256(key);
}
