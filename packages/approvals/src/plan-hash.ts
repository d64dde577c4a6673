import { canonicalHash, type JsonValue, type Principal, type ToolRef } from "@toolgate/contracts";
import type { ResourceRef } from "@toolgate/registry";

/**
 * One resource a call acts on. `version` is the resource version the approver saw. The resources of the tools
 * registered today (tasks that `save_evidence` appends to) have no version: evidence is append-only and
 * deduplicated per idempotency key, so there is no state an approval could go stale against, and `version` is
 * null. A contract whose resource has versions supplies them, on both sides, through {@link PlanInput.versions}.
 */
export interface PlanResource {
  type: string;
  pointer: string;
  /** The id the arguments name (a string as given; other JSON values in canonical form); null when absent. */
  id: string | null;
  version: string | null;
}

/**
 * What a human approves: exactly this tool contract (name, version and content hash), these normalized
 * arguments, on behalf of this principal, acting on these resources at these versions.
 */
export interface Plan {
  v: 1;
  tool: ToolRef;
  arguments: Record<string, JsonValue>;
  principal: { tenant: string; subject: string };
  resources: PlanResource[];
}

export interface PlanInput {
  tool: ToolRef;
  /** The normalized arguments (as validated by the registry, or as the executor is about to run them). */
  arguments: Record<string, JsonValue>;
  principal: Principal;
  /** The resources the arguments name, as the compiled tool resolves them (`CompiledTool.resources`). */
  resources: readonly ResourceRef[];
  /** Version of a named resource, when its type has versions; absent: every resource is unversioned. */
  versions?: (type: string, id: string) => string | null;
}

/** Builds the plan of a call. Pure; never throws on any arguments. */
export function planOf(input: PlanInput): Plan {
  return {
    v: 1,
    tool: { name: input.tool.name, version: input.tool.version, hash: input.tool.hash },
    arguments: input.arguments,
    // Roles and session are not part of the plan: who acts is the tenant and subject; what they may do is policy's.
    principal: { tenant: input.principal.tenant, subject: input.principal.subject },
    resources: input.resources.map(({ type, pointer, id }) => ({ type, pointer, id, version: id === null ? null : (input.versions?.(type, id) ?? null) })),
  };
}

/**
 * The plan hash: `sha256` of the plan's RFC 8785 form. Arguments that differ only in key order or number
 * spelling (`1` and `1.0`) have one hash; any other difference — a value, a key, a string's code points
 * (Unicode normalization forms are different strings) — gives another.
 */
export function planHash(input: PlanInput): string {
  return canonicalHash(planOf(input));
}
