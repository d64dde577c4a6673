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
  /** A long-running tool accepted the work; its completion is tracked by operation id. */
  | { ok: "accepted"; operation_id: string }
  | { ok: false; code: ErrorCode; message: string; retryable?: boolean; details?: Record<string, JsonValue> };

export type ToolHandler = (args: Record<string, JsonValue>, ctx: ToolContext) => Promise<ToolOutcome>;

/**
 * Object layer: turns the ids in the arguments into exactly one object each, where the tool runs. A
 * failure is OBJECT_NOT_FOUND or AMBIGUOUS_OBJECT; the resolved objects are passed on to `precheck`.
 */
export type ObjectResolver = (
  args: Record<string, JsonValue>,
  ctx: ToolContext,
) => Promise<{ ok: true; objects: Record<string, JsonValue> } | { ok: false; code: "OBJECT_NOT_FOUND" | "AMBIGUOUS_OBJECT"; message: string }>;

/** State layer: checks that the resolved objects' state allows the action, else STATE_CONFLICT. */
export type StatePrecheck = (
  args: Record<string, JsonValue>,
  objects: Record<string, JsonValue>,
  ctx: ToolContext,
) => Promise<{ ok: true } | { ok: false; code: "STATE_CONFLICT"; message: string }>;

/** A contract bound to its in-process implementation and, optionally, its object and state layers. */
export interface ToolDefinition {
  readonly contract: ToolContractInput;
  readonly handler: ToolHandler;
  readonly resolve?: ObjectResolver;
  readonly precheck?: StatePrecheck;
}

/** Binds a contract to its handler; the registry validates the contract when it is loaded. */
export function defineTool(
  contract: ToolContractInput,
  handler: ToolHandler,
  layers: { resolve?: ObjectResolver; precheck?: StatePrecheck } = {},
): ToolDefinition {
  return { contract, handler, ...layers };
}

/**
 * The handler preceded by the definition's object layer (every id must resolve to exactly one object, else
 * OBJECT_NOT_FOUND / AMBIGUOUS_OBJECT) and state layer (the objects' state must allow the action, else
 * STATE_CONFLICT). A failing layer ends the call before the handler runs; nothing is retried here.
 */
export function layeredHandler(definition: ToolDefinition): ToolHandler {
  const { resolve, precheck, handler } = definition;
  if (!resolve && !precheck) return handler;
  return async (args, ctx) => {
    let objects: Record<string, JsonValue> = {};
    if (resolve) {
      const resolved = await resolve(args, ctx);
      if (!resolved.ok) return { ok: false, code: resolved.code, message: resolved.message, retryable: false };
      objects = resolved.objects;
    }
    if (precheck) {
      const checked = await precheck(args, objects, ctx);
      if (!checked.ok) return { ok: false, code: checked.code, message: checked.message, retryable: false };
    }
    return handler(args, ctx);
  };
}
