import type { CallId, ErrorCode, JsonValue, Principal, RunContext, RunId } from "@toolgate/contracts";
import type { ToolContractInput } from "./contract.js";

/** What a tool implementation may know about the call it runs. Identity comes from the runtime, never from arguments. */
export interface ToolContext {
  callId: CallId;
  runId: RunId;
  principal: Principal;
  context: RunContext;
  /** Runtime-generated key; send it downstream (e.g. HTTP `Idempotency-Key`) so the far side deduplicates too. */
  idempotencyKey: string;
  /** Aborted when the contract's timeout elapses or the executor shuts down. */
  signal: AbortSignal;
}

/**
 * A tool's own verdict. `ok: false` is an expected business failure with a stable code; anything thrown is
 * an unexpected failure the executor reports as EXECUTION_ERROR without its message.
 */
export type ToolOutcome =
  | { ok: true; data: JsonValue; truncated?: boolean }
  | { ok: false; code: ErrorCode; message: string; retryable?: boolean; details?: Record<string, JsonValue> };

export type ToolHandler = (args: Record<string, JsonValue>, ctx: ToolContext) => Promise<ToolOutcome>;

/** A contract bound to its in-process implementation. */
export interface ToolDefinition {
  readonly contract: ToolContractInput;
  readonly handler: ToolHandler;
}

/** Binds a contract to its handler; the registry validates the contract when it is loaded. */
export function defineTool(contract: ToolContractInput, handler: ToolHandler): ToolDefinition {
  return { contract, handler };
}
