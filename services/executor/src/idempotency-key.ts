import { sha256, type Decision, type JsonValue } from "@toolgate/contracts";
import type { ToolContract } from "@toolgate/registry";

/**
 * The runtime's idempotency key for a call: `<tool>:<run_id>:<call_id>` by default, or the contract's
 * business-key template rendered from trusted fields and the validated arguments. Never chosen by the model.
 * Template placeholders: {run_id} {call_id} {tenant} {subject} {task_id} {args_hash} {args:/json/pointer}.
 */
export function idempotencyKey(contract: ToolContract, decision: Decision, args: Record<string, JsonValue>): string {
  const template = contract.idempotency.kind === "keyed" ? contract.idempotency.key_template : undefined;
  if (!template) return `${contract.name}:${decision.run_id}:${decision.call_id}`;
  const rendered = template.replace(/\{([^}]+)\}/g, (_, name: string) => {
    if (name.startsWith("args:")) return JSON.stringify(pointer(args, name.slice(5)) ?? null);
    switch (name) {
      case "run_id":
        return decision.run_id;
      case "call_id":
        return decision.call_id;
      case "tenant":
        return decision.principal.tenant;
      case "subject":
        return decision.principal.subject;
      case "task_id":
        return decision.context.task_id ?? "";
      case "args_hash":
        return decision.args_hash;
      default:
        throw new TypeError(`unknown placeholder {${name}} in the key template of ${contract.name}`);
    }
  });
  return `${contract.name}:${rendered}`;
}

/** Short digest of a key for events and logs: keys may embed argument values. */
export function keyDigest(key: string): string {
  return sha256(key);
}

function pointer(value: JsonValue, path: string): JsonValue | undefined {
  if (path === "") return value;
  let current: JsonValue | undefined = value;
  for (const raw of path.split("/").slice(1)) {
    const token = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    if (current === null || typeof current !== "object") return undefined;
    current = Array.isArray(current) ? current[Number(token)] : (current as Record<string, JsonValue>)[token];
  }
  return current;
}
