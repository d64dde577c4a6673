import type { JsonValue } from "@toolgate/contracts";
import { contractHash, ToolContractSchema, type CompiledTool, type ToolContext, type ToolDefinition, type ToolOutcome } from "@toolgate/registry";
import { runTool, type ToolAnswer, type ToolRun } from "./run-tool.js";
import { ShutdownFanout } from "./shutdown-fanout.js";
import { NotAppliedError } from "./thrown-failure.js";
import type { HttpTransport } from "./transports/http-transport.js";
import type { McpTransport } from "./transports/mcp-transport.js";

export interface ToolInvokerDeps {
  /** In-process implementations by tool name, with their optional object and state layers. */
  inProcess: ReadonlyMap<string, ToolDefinition>;
  http?: HttpTransport;
  mcp?: McpTransport;
  /** Aborted when the process stops: running tools see it through their AbortSignal. */
  shutdown: AbortSignal;
}

/**
 * Calls a handler. A synchronous throw comes before the handler could await any I/O, so it cannot have had an
 * effect: it is raised as a NotAppliedError (a definite failure, even for a writing tool).
 */
function callHandler(handler: ToolDefinition["handler"], args: Record<string, JsonValue>, ctx: ToolContext): Promise<ToolOutcome> {
  try {
    return handler(args, ctx);
  } catch (error) {
    return Promise.reject(new NotAppliedError("the tool failed before it started", { cause: error }));
  }
}

/**
 * The handler preceded by the tool's object layer (ids must resolve to exactly one object) and state layer
 * (the objects' state must allow the action), all within the contract's timeout. The layers only read and run
 * before the handler, so an exception from them is a NotAppliedError.
 */
function withLayers(definition: ToolDefinition): ToolDefinition["handler"] {
  const { resolve, precheck, handler } = definition;
  if (!resolve && !precheck) return (args, ctx) => callHandler(handler, args, ctx);
  return async (args, ctx: ToolContext) => {
    let objects: Record<string, JsonValue> = {};
    try {
      if (resolve) {
        const resolved = await resolve(args, ctx);
        if (!resolved.ok) return { ok: false, code: resolved.code, message: resolved.message };
        objects = resolved.objects;
      }
      if (precheck) {
        const checked = await precheck(args, objects, ctx);
        if (!checked.ok) return { ok: false, code: checked.code, message: checked.message };
      }
    } catch (error) {
      throw new NotAppliedError("the tool's object or state layer failed before the tool ran", { cause: error });
    }
    return callHandler(handler, args, ctx);
  };
}

/** Runs a tool through its contract's transport (in process, HTTP or MCP) with the contract's timeout. */
export class ToolInvoker {
  readonly #deps: ToolInvokerDeps;
  readonly #handlers = new Map<string, ToolDefinition["handler"]>();
  /** Content hash of the contract each in-process handler implements: it runs that version only. */
  readonly #implemented = new Map<string, string>();
  /** The only listener this invoker adds to the shutdown signal, however many tools run at once. */
  readonly #shutdown: ShutdownFanout;

  constructor(deps: ToolInvokerDeps) {
    this.#deps = deps;
    this.#shutdown = new ShutdownFanout(deps.shutdown);
    for (const [name, definition] of deps.inProcess) {
      this.#handlers.set(name, withLayers(definition));
      this.#implemented.set(name, contractHash(ToolContractSchema.parse(definition.contract)));
    }
  }

  /** Why this executor cannot run the tool (no implementation, endpoint not allowed, server quarantined), or undefined. */
  refusal(tool: CompiledTool): string | undefined {
    const { transport, name } = tool.contract;
    switch (transport.kind) {
      case "in_process":
        if (!this.#handlers.has(name)) return `${name} has no implementation on this executor`;
        return this.#implemented.get(name) === tool.hash ? undefined : `${name}@${tool.contract.version} is not the version implemented on this executor`;
      case "http":
        return this.#deps.http ? this.#deps.http.refusal(tool.contract) : "HTTP tools are not enabled";
      case "mcp":
        return this.#deps.mcp ? this.#deps.mcp.refusal(tool.contract) : "MCP tools are not enabled";
    }
  }

  /** Runs the tool once; never throws (a throwing tool is a `threw` run). */
  run(tool: CompiledTool, args: Record<string, JsonValue>, context: Omit<ToolContext, "signal">, timeoutMs = tool.contract.timeout_ms): Promise<ToolRun> {
    return runTool((signal) => this.#invoke(tool, args, { ...context, signal }), timeoutMs, this.#shutdown);
  }

  async #invoke(tool: CompiledTool, args: Record<string, JsonValue>, ctx: ToolContext): Promise<ToolAnswer> {
    const { contract } = tool;
    switch (contract.transport.kind) {
      case "in_process": {
        const handler = this.#handlers.get(contract.name);
        if (!handler) return { outcome: { ok: false, code: "TOOL_DISABLED", message: `${contract.name} is not available` } };
        return { outcome: await handler(args, ctx), downstream: { transport: "in_process" } };
      }
      case "http":
        if (!this.#deps.http) return { outcome: { ok: false, code: "TOOL_DISABLED", message: `${contract.name} is not available` } };
        return this.#deps.http.call(contract, args, ctx);
      case "mcp":
        if (!this.#deps.mcp) return { outcome: { ok: false, code: "TOOL_DISABLED", message: `${contract.name} is not available` } };
        return this.#deps.mcp.call(contract, args, ctx);
    }
  }
}
