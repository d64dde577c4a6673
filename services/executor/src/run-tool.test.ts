import { newCallId, newRunId } from "@toolgate/contracts";
import type { ToolHandler } from "@toolgate/registry";
import { describe, expect, it } from "vitest";
import { runTool } from "./run-tool.js";

const context = { callId: newCallId(), runId: newRunId(), principal: { tenant: "t", subject: "s", roles: [] }, context: {}, idempotencyKey: "k" };

describe("runTool", () => {
  it("returns the tool's outcome", async () => {
    const handler: ToolHandler = async () => ({ ok: true, data: { n: 1 } });
    const run = await runTool(handler, {}, context, 1_000, new AbortController().signal);
    expect(run).toMatchObject({ kind: "returned", outcome: { ok: true, data: { n: 1 } } });
  });

  it("times out a tool that never answers and aborts its signal", async () => {
    let seen: AbortSignal | undefined;
    const handler: ToolHandler = (_args, ctx) => {
      seen = ctx.signal;
      return new Promise(() => undefined);
    };
    const run = await runTool(handler, {}, context, 50, new AbortController().signal);
    expect(run.kind).toBe("timed_out");
    expect(seen?.aborted).toBe(true);
  });

  it("reports a thrown error without throwing", async () => {
    const handler: ToolHandler = async () => {
      throw new Error("SELECT * FROM secrets failed at /srv/app/db.ts:42");
    };
    const run = await runTool(handler, {}, context, 1_000, new AbortController().signal);
    expect(run.kind).toBe("threw");
  });

  it("passes an executor shutdown to the tool", async () => {
    const shutdown = new AbortController();
    const handler: ToolHandler = (_args, ctx) =>
      new Promise((resolve) => ctx.signal.addEventListener("abort", () => resolve({ ok: false, code: "TIMEOUT", message: "stopped" })));
    const running = runTool(handler, {}, context, 10_000, shutdown.signal);
    shutdown.abort();
    expect(await running).toMatchObject({ kind: "returned", outcome: { ok: false } });
  });
});
