import type { ToolOutcome } from "@toolgate/registry";
import { describe, expect, it } from "vitest";
import { runTool } from "./run-tool.js";
import { ShutdownFanout } from "./shutdown-fanout.js";

const answer = (outcome: ToolOutcome) => ({ outcome });
const noShutdown = (): ShutdownFanout => new ShutdownFanout(new AbortController().signal);

describe("runTool", () => {
  it("returns the tool's answer", async () => {
    const run = await runTool(async () => answer({ ok: true, data: { n: 1 } }), 1_000, noShutdown());
    expect(run).toMatchObject({ kind: "returned", answer: { outcome: { ok: true, data: { n: 1 } } } });
  });

  it("times out a tool that never answers and aborts its signal", async () => {
    let seen: AbortSignal | undefined;
    const run = await runTool(
      (signal) => {
        seen = signal;
        return new Promise(() => undefined);
      },
      50,
      noShutdown(),
    );
    expect(run).toMatchObject({ kind: "timed_out" });
    expect(run.durationMs).toBeGreaterThanOrEqual(50);
    expect(seen?.aborted).toBe(true);
  });

  it("reports a thrown error without throwing, synchronous or not", async () => {
    const run = await runTool(
      async () => {
        throw new Error("SELECT * FROM secrets failed at /srv/app/db.ts:42");
      },
      1_000,
      noShutdown(),
    );
    expect(run.kind).toBe("threw");
    const sync = await runTool(
      () => {
        throw new Error("sync");
      },
      1_000,
      noShutdown(),
    );
    expect(sync.kind).toBe("threw");
  });

  it("ignores a rejection that comes after the timeout", async () => {
    let rejectLate: (error: Error) => void = () => undefined;
    const late = new Promise<never>((_, reject) => (rejectLate = reject));
    const run = await runTool(() => late, 5, noShutdown());
    expect(run.kind).toBe("timed_out");
    rejectLate(new Error("late"));
    // Unhandled rejections are reported once the microtask queue drains: one macrotask later.
    await new Promise((resolve) => setImmediate(resolve));
  });

  it("passes an executor shutdown to the tool", async () => {
    const shutdown = new AbortController();
    const running = runTool(
      (signal) => new Promise((resolve) => signal.addEventListener("abort", () => resolve(answer({ ok: false, code: "TIMEOUT", message: "stopped" })))),
      10_000,
      new ShutdownFanout(shutdown.signal),
    );
    shutdown.abort();
    expect(await running).toMatchObject({ kind: "returned", answer: { outcome: { ok: false } } });
  });
});
