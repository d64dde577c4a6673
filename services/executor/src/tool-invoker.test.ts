import { defineTool, ToolRegistry, type ToolContractInput, type ToolHandler } from "@toolgate/registry";
import { describe, expect, it } from "vitest";
import { classifyThrown, NotAppliedError } from "./thrown-failure.js";
import { ToolInvoker } from "./tool-invoker.js";

// What the invoker knows about where a writing tool failed: before the handler (its read-only layers, or a
// synchronous throw) nothing can have been applied; once the handler is running, it cannot say.

const contract: ToolContractInput = {
  name: "create_ticket",
  version: "1.0.0",
  description: "Creates a ticket. Use when asked to file an issue; do not use to search tickets.",
  owner: "test",
  input_schema: { type: "object", additionalProperties: false },
  output_schema: { type: "object", additionalProperties: false },
  side_effect: "write",
  risk: "low",
  timeout_ms: 1_000,
  idempotency: { kind: "keyed" },
};
const tool = ToolRegistry.from([contract]).get("create_ticket")!;
const context = { callId: "call_1", runId: "run_1", principal: { tenant: "acme", subject: "alice", roles: [] }, context: {}, idempotencyKey: "k" };

async function thrownBy(handler: ToolHandler, layers: Parameters<typeof defineTool>[2] = {}): Promise<unknown> {
  const invoker = new ToolInvoker({ inProcess: new Map([[contract.name, defineTool(contract, handler, layers)]]), shutdown: new AbortController().signal });
  const run = await invoker.run(tool, {}, context);
  if (run.kind !== "threw") throw new Error(`expected a throw, got ${run.kind}`);
  return run.error;
}

describe("ToolInvoker and failures before the effect", () => {
  it("raises a synchronous throw of the handler as not applied", async () => {
    const error = await thrownBy(() => {
      throw new RangeError("title too long");
    });
    expect(error).toBeInstanceOf(NotAppliedError);
    expect((error as Error).cause).toBeInstanceOf(RangeError);
    expect(classifyThrown(error, tool.writes)).toEqual({ kind: "definite" });
  });

  it("raises an exception of the object or state layer as not applied", async () => {
    const handler: ToolHandler = async () => ({ ok: true, data: {} });
    const fromResolve = await thrownBy(handler, { resolve: () => Promise.reject(new Error("lookup failed")) });
    const fromPrecheck = await thrownBy(handler, { precheck: () => Promise.reject(Object.assign(new Error("reset"), { code: "ECONNRESET" })) });
    for (const error of [fromResolve, fromPrecheck]) expect(classifyThrown(error, tool.writes)).toEqual({ kind: "definite" });
  });

  it("leaves a rejection of a running handler as it is: its effect is unknown", async () => {
    const error = await thrownBy(async () => {
      await Promise.resolve();
      throw Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" });
    });
    expect(error).not.toBeInstanceOf(NotAppliedError);
    expect(classifyThrown(error, tool.writes)).toEqual({ kind: "uncertain", cause: "connection_lost" });
  });
});
