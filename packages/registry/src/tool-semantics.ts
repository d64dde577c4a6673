import { canonicalJson, type JsonValue } from "@toolgate/contracts";
import type { ToolContract } from "./contract.js";
import { ContractError } from "./contract-error.js";
import { pointerTokens, replaceAtPointers, resolvePointer } from "./json-pointer.js";

/**
 * What a contract means, decided once: whether a call writes, which resources its arguments name, what is
 * redacted, and the call's idempotency key. Every service asks the compiled tool (see `CompiledTool`) rather
 * than reading contract fields itself, so policy's resource check, the orchestrator's lock and the executor's
 * key cannot disagree on the same arguments.
 */

/** What replaces a value the contract marks sensitive, wherever it would be shown or stored. */
export const REDACTED = "[REDACTED]";

/** One resource a call acts on, as named by a contract pointer into its arguments. */
export interface ResourceRef {
  type: string;
  pointer: string;
  /** The id the arguments name: a string as given, any other JSON value in RFC 8785 form; null when absent or null. */
  id: string | null;
}

/** Trusted facts of a call that a key template may name (never anything the model chose, except `{args:…}`). */
export interface KeyFacts {
  run_id: string;
  call_id: string;
  tenant: string;
  subject: string;
  task_id?: string | undefined;
  args_hash: string;
}

/** Whether a call of the tool changes anything (side effect `write` or `external`): scheduling, locks, retries, hints. */
export function writes(contract: Pick<ToolContract, "side_effect">): boolean {
  return contract.side_effect === "write" || contract.side_effect === "external";
}

/**
 * What a contract says about its calls' effects, as MCP tool annotations put it: read-only (nothing written),
 * destructive (a write that may change or remove what exists: every write unless its contract says `additive`),
 * idempotent (repeating the same call has no further effect: nothing written, natural idempotency, or a business
 * key that names no call id: a retry in the run is the same call), open world (it reaches outside systems or returns their
 * content).
 */
export function effectHints(contract: Pick<ToolContract, "side_effect" | "write_effect" | "idempotency" | "untrusted_output">): {
  readOnly: boolean;
  destructive: boolean;
  idempotent: boolean;
  openWorld: boolean;
} {
  const writing = writes(contract);
  const { idempotency } = contract;
  const keyedByArguments = idempotency.kind === "keyed" && idempotency.key_template !== undefined && !/\{call_id\}/.test(idempotency.key_template);
  return {
    readOnly: !writing,
    destructive: writing && contract.write_effect !== "additive",
    idempotent: !writing || idempotency.kind === "natural" || keyedByArguments,
    openWorld: contract.side_effect === "external" || contract.untrusted_output,
  };
}

/** The resources `args` name, one per contract resource pointer, in contract order. */
export function resourcesOf(contract: Pick<ToolContract, "resources">, args: JsonValue): ResourceRef[] {
  return contract.resources.map(({ type, pointer }) => {
    const value = resolvePointer(args, pointer);
    const id = value === undefined || value === null ? null : typeof value === "string" ? value : canonicalJson(value);
    return { type, pointer, id };
  });
}

/** `<type>:<id>` of each named resource: what a write locks. */
export function resourceKeys(resources: readonly ResourceRef[]): string[] {
  return resources.filter((r): r is ResourceRef & { id: string } => r.id !== null).map((r) => `${r.type}:${r.id}`);
}

/**
 * A copy of `args` with every value at a sensitive pointer replaced by {@link REDACTED}. The empty pointer
 * (all of the arguments are sensitive) leaves an object that shows nothing of them.
 */
export function redactArguments(contract: Pick<ToolContract, "sensitive">, args: Record<string, JsonValue>): Record<string, JsonValue> {
  const redacted = replaceAtPointers(args, contract.sensitive, REDACTED);
  return typeof redacted === "object" && redacted !== null && !Array.isArray(redacted) ? redacted : { [REDACTED]: REDACTED };
}

/** A copy of a result's data with every value at one of the contract's `sensitive_results` pointers redacted. */
export function redactResult(contract: Pick<ToolContract, "sensitive_results">, data: JsonValue): JsonValue {
  return replaceAtPointers(data, contract.sensitive_results, REDACTED);
}

const FACT_PLACEHOLDERS = new Set(["run_id", "call_id", "tenant", "subject", "task_id", "args_hash"]);

/**
 * The idempotency key of the tool's calls: `<tool>:<run_id>:<call_id>` unless the contract gives a business-key
 * template, rendered from trusted facts and the validated arguments — `{run_id}`, `{call_id}`, `{tenant}`,
 * `{subject}`, `{task_id}`, `{args_hash}`, and `{args:<JSON pointer>}` (the value's RFC 8785 form, `null` when
 * absent). Checked when the contract compiles: an unknown placeholder or a malformed pointer is a
 * {@link ContractError}, never a failure of the first call.
 */
export function compileKeyTemplate(contract: Pick<ToolContract, "name" | "idempotency">): (facts: KeyFacts, args: Record<string, JsonValue>) => string {
  const template = contract.idempotency.kind === "keyed" ? contract.idempotency.key_template : undefined;
  if (template === undefined) return (facts) => `${contract.name}:${facts.run_id}:${facts.call_id}`;
  const parts: ((facts: KeyFacts, args: Record<string, JsonValue>) => string)[] = [];
  let rest = template;
  for (let open = rest.indexOf("{"); open >= 0; open = rest.indexOf("{")) {
    const close = rest.indexOf("}", open);
    if (close < 0) throw new ContractError(`the key template of ${contract.name} has an unclosed "{"`);
    const literal = rest.slice(0, open);
    const name = rest.slice(open + 1, close);
    parts.push(() => literal);
    if (name.startsWith("args:")) {
      const pointer = name.slice("args:".length);
      if (pointerTokens(pointer) === undefined)
        throw new ContractError(`the key template of ${contract.name} names ${JSON.stringify(pointer)}, which is not a JSON pointer`);
      parts.push((_, args) => canonicalJson(resolvePointer(args, pointer) ?? null));
    } else if (FACT_PLACEHOLDERS.has(name)) {
      const fact = name as keyof KeyFacts;
      parts.push((facts) => facts[fact] ?? "");
    } else {
      throw new ContractError(`unknown placeholder {${name}} in the key template of ${contract.name}`);
    }
    rest = rest.slice(close + 1);
  }
  const tail = rest;
  return (facts, args) => `${contract.name}:${parts.map((part) => part(facts, args)).join("")}${tail}`;
}
