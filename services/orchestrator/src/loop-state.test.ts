import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ProgressWriter } from "./loop-state.js";
import type { RunProgress, RunStore } from "./run-store.js";

describe("ProgressWriter", () => {
  let written: [string, RunProgress][];
  let now: number;
  const store = {
    recordProgress: (runId: string, progress: RunProgress) => (written.push([runId, progress]), Promise.resolve(undefined)),
  } as unknown as RunStore;
  const logger = { warn: vi.fn() } as never;

  beforeEach(() => {
    vi.useFakeTimers();
    written = [];
    now = 0;
  });
  afterEach(() => vi.useRealTimers());

  it("writes the first progress at once and at most one more per interval, the latest state winning", async () => {
    const writer = new ProgressWriter(store, logger, 1_000, () => now);
    writer.write("run_a", { turn: 1, awaiting: "model" });
    await vi.advanceTimersByTimeAsync(0);
    writer.write("run_a", { awaiting: "tools" });
    writer.write("run_a", { turn: 2 });
    writer.write("run_a", { awaiting: "model" });
    await vi.advanceTimersByTimeAsync(500);
    expect(written).toEqual([["run_a", { turn: 1, awaiting: "model" }]]);
    now = 1_000;
    await vi.advanceTimersByTimeAsync(500);
    expect(written).toEqual([
      ["run_a", { turn: 1, awaiting: "model" }],
      ["run_a", { awaiting: "model", turn: 2 }],
    ]);
  });

  it("drops what is queued when the run ends, so that no progress lands after the end", async () => {
    const writer = new ProgressWriter(store, logger, 1_000, () => now);
    writer.write("run_b", { turn: 1 });
    await vi.advanceTimersByTimeAsync(0);
    writer.write("run_b", { turn: 2 });
    await writer.cancel("run_b");
    now = 5_000;
    await vi.advanceTimersByTimeAsync(5_000);
    expect(written).toEqual([["run_b", { turn: 1 }]]);
  });
});
