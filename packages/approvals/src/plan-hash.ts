import { canonicalHash, canonicalJson, type JsonValue, type Principal, type ToolRef } from "@toolgate/contracts";

/** Where a contract says a call's target resource is named: its type and an RFC 6901 pointer into the arguments. */
export interface ResourcePointer {
  type: string;
  pointer: string;
}

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
  /** The contract's resource pointers. */
  resources: readonly ResourcePointer[];
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
    resources: input.resources.map(({ type, pointer }) => {
      const id = resourceId(input.arguments, pointer);
      return { type, pointer, id, version: id === null ? null : (input.versions?.(type, id) ?? null) };
    }),
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

/** The id of the resource `pointer` names in `args`: a string as it is, another JSON value in canonical form, or null. */
export function resourceId(args: Record<string, JsonValue>, pointer: string): string | null {
  const value = jsonPointer(args, pointer);
  if (value === undefined || value === null) return null;
  return typeof value === "string" ? value : canonicalJson(value);
}

/** Resolves an RFC 6901 pointer against own properties only; undefined when any step is missing. */
export function jsonPointer(value: JsonValue, pointer: string): JsonValue | undefined {
  if (pointer === "") return value;
  if (!pointer.startsWith("/")) return undefined;
  let current: JsonValue | undefined = value;
  for (const raw of pointer.slice(1).split("/")) {
    const token = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    if (current === null || typeof current !== "object") return undefined;
    if (Array.isArray(current)) {
      if (!/^(0|[1-9][0-9]*)$/.test(token)) return undefined;
      current = current[Number(token)];
    } else {
      current = Object.hasOwn(current, token) ? current[token] : undefined;
    }
  }
  return current;
}
