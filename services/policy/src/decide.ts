import { failure, type CallEventOf, type FailureResult, type JsonValue } from "@toolgate/contracts";
import type { CompiledTool, ToolRegistry } from "@toolgate/registry";
import { authorizeCall } from "./authorization.js";
import type { CedarPolicies } from "./cedar-policies.js";

/** Policy's verdict on one proposal. */
export type Verdict =
  | { kind: "rejected"; result: FailureResult; stage: "structural" }
  | { kind: "denied"; result: FailureResult; reasons: string[]; tool: CompiledTool; argsHash: string }
  | { kind: "approval_required"; tool: CompiledTool; arguments: Record<string, JsonValue>; argsHash: string; reasons: string[] }
  | { kind: "authorized"; tool: CompiledTool; arguments: Record<string, JsonValue>; argsHash: string; reasons: string[] };

/** The model-facing message of a denial: the same whether or not the object named by the arguments exists. */
export function deniedMessage(tool: string, resource?: { type: string; pointer: string }): string {
  return resource ? `you are not allowed to use ${tool} on the ${resource.type} named at ${resource.pointer}` : `you are not allowed to use ${tool}`;
}

/**
 * Decides one proposal: the tool must be registered and enabled, the arguments must pass the contract's
 * structural layer, and Cedar must allow the trusted principal to use the tool and to act on the resources the
 * arguments point at — possibly only once a human approves. Identity, the run's task and its taint come from
 * the event's trusted fields, never from the arguments. Pure: no I/O (quotas are checked by the caller).
 */
export function decide(proposal: CallEventOf<"proposed">, registry: ToolRegistry, policies: CedarPolicies, now: Date): Verdict {
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
  const authorization = authorizeCall(policies, {
    principal: proposal.principal,
    tool,
    arguments: checked.arguments,
    context: proposal.payload.context,
    taint: proposal.payload.taint ?? { tainted: false, sources: [] },
    now,
  });
  switch (authorization.kind) {
    case "deny": {
      const resource = authorization.level === "resource" ? { type: authorization.type, pointer: authorization.pointer } : undefined;
      return {
        kind: "denied",
        reasons: authorization.reasons,
        tool,
        argsHash: checked.argsHash,
        result: failure(callId, "PERMISSION_DENIED", deniedMessage(name, resource), resource ? { details: { pointer: resource.pointer } } : {}),
      };
    }
    case "approval":
      return { kind: "approval_required", tool, arguments: checked.arguments, argsHash: checked.argsHash, reasons: authorization.reasons };
    case "allow":
      return { kind: "authorized", tool, arguments: checked.arguments, argsHash: checked.argsHash, reasons: authorization.reasons };
  }
}
