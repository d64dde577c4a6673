import { failure, type CallEventOf, type FailureResult, type JsonValue } from "@toolgate/contracts";
import type { CompiledTool, ToolRegistry } from "@toolgate/registry";
import type { Grants } from "./grants.js";

/** Policy's verdict on one proposal. */
export type Verdict =
  | { kind: "rejected"; result: FailureResult; stage: "structural" }
  | { kind: "denied"; result: FailureResult; reasons: string[]; tool: CompiledTool; argsHash: string }
  | { kind: "authorized"; tool: CompiledTool; arguments: Record<string, JsonValue>; argsHash: string; reasons: string[] };

/**
 * Decides one proposal: the tool must be registered and enabled, the arguments must pass the contract's
 * structural layer, and a grant must allow the trusted principal to use the tool. Pure: no I/O.
 */
export function decide(proposal: CallEventOf<"proposed">, registry: ToolRegistry, grants: Grants): Verdict {
  const callId = proposal.call_id;
  const { tool_name: name, arguments_json: argumentsJson } = proposal.payload;
  const tool = registry.get(name);
  if (!tool) {
    return {
      kind: "rejected",
      stage: "structural",
      result: failure(callId, "UNKNOWN_TOOL", `no tool named ${JSON.stringify(name.slice(0, 64))} is available`),
    };
  }
  if (!tool.contract.enabled) {
    return { kind: "rejected", stage: "structural", result: failure(callId, "TOOL_DISABLED", `${name} is disabled`) };
  }
  const checked = registry.checkArguments(tool, argumentsJson);
  if (!checked.ok) {
    const details = checked.violations.length > 0 ? { violations: checked.violations } : undefined;
    return { kind: "rejected", stage: "structural", result: failure(callId, checked.code, checked.message, details ? { details } : {}) };
  }
  const grant = grants.check(proposal.principal, name);
  if (!grant.allowed) {
    return {
      kind: "denied",
      reasons: [grant.reason],
      tool,
      argsHash: checked.argsHash,
      result: failure(callId, "PERMISSION_DENIED", `you are not allowed to use ${name}`),
    };
  }
  return { kind: "authorized", tool, arguments: checked.arguments, argsHash: checked.argsHash, reasons: [grant.reason] };
}
