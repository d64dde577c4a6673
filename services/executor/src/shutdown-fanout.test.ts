import { getEventListeners } from "node:events";
import { defineTool, ToolRegistry, type ToolContractInput } from "@toolgate/registry";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ToolInvoker } from "./tool-invoker.js";

// Every invocation of every tool shares the process's shutdown signal: listeners on it must not grow with the
// number of invocations, at once or over time, and a shutdown must still reach every running tool.

const contract: ToolContractInput = {
  name: "wait_for_release",
  version: "1.0.0",
  description: "Waits until the test releases it or the executor shuts down. Use only in tests.",
  owner: "test",
  input_schema: { type: "object", additionalProperties: false },
  output_schema: { type: "object", properties: { stopped: { type: "boolean" } }, required: ["stopped"], additionalProperties: false },
  side_effect: "read",
  risk: "low",
  timeout_ms: 10_000,
  idempotency: { kind: "natural" },
};
const tool = ToolRegistry.from([contract]).get("wait_for_release")!;
const context = { callId: "call_1", runId: "run_1", principal: { tenant: "acme", subject: "alice", roles: [] }, context: {}, idempotencyKey: "k" };

/** Tools parked until released; each one answers whether its signal was aborted. */
function parkedTools() {
  const waiting: (() => void)[] = [];
  const definition = defineTool(
    contract,
    (_args, ctx) =>
      new Promise((resolve) => {
        const answer = (): void => resolve({ ok: true, data: { stopped: ctx.signal.aborted } });
        if (ctx.signal.aborted) return answer();
        waiting.push(answer);
        ctx.signal.addEventListener("abort", answer, { once: true });
      }),
  );
  return { definition, waiting, releaseAll: () => waiting.splice(0).forEach((release) => release()) };
}

let warnings: Error[] = [];
const onWarning = (warning: Error): void => {
  warnings.push(warning);
};
beforeEach(() => {
  warnings = [];
  process.on("warning", onWarning);
});
afterEach(() => {
  process.off("warning", onWarning);
});

describe("the shutdown signal shared by every invocation", () => {
  it("holds one listener whatever the number of invocations, in flight or settled", async () => {
    const shutdown = new AbortController();
    const parked = parkedTools();
    const invoker = new ToolInvoker({ inProcess: new Map([[contract.name, parked.definition]]), shutdown: shutdown.signal });
    const listeners = (): number => getEventListeners(shutdown.signal, "abort").length;
    const before = listeners();

    // 64 at once: far beyond the default limit of 10 listeners per event.
    const running = Array.from({ length: 64 }, () => invoker.run(tool, {}, context));
    await expect.poll(() => parked.waiting.length).toBe(64);
    expect(listeners()).toBe(before);
    parked.releaseAll();
    expect((await Promise.all(running)).every((run) => run.kind === "returned")).toBe(true);

    // And 200 one after the other.
    for (let i = 0; i < 200; i++) {
      const run = invoker.run(tool, {}, context);
      await expect.poll(() => parked.waiting.length).toBe(1);
      parked.releaseAll();
      await run;
    }
    expect(listeners()).toBe(before);
    await new Promise((resolve) => setImmediate(resolve));
    expect(warnings.filter((w) => w.name === "MaxListenersExceededWarning")).toEqual([]);
  });

  it("still aborts every running invocation when the process shuts down, and later ones at once", async () => {
    const shutdown = new AbortController();
    const parked = parkedTools();
    const invoker = new ToolInvoker({ inProcess: new Map([[contract.name, parked.definition]]), shutdown: shutdown.signal });
    const running = Array.from({ length: 20 }, () => invoker.run(tool, {}, context));
    await expect.poll(() => parked.waiting.length).toBe(20);
    shutdown.abort();
    for (const run of await Promise.all(running)) expect(run).toMatchObject({ kind: "returned", answer: { outcome: { ok: true, data: { stopped: true } } } });
    // The tool sees an already aborted signal and answers at once.
    expect(await invoker.run(tool, {}, context)).toMatchObject({ kind: "returned", answer: { outcome: { ok: true, data: { stopped: true } } } });
  });
});
