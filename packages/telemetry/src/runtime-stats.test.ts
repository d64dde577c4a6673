import { describe, expect, it } from "vitest";
import { epochMicros, RuntimeStats } from "./runtime-stats.js";

describe("RuntimeStats", () => {
  it("counts by name and keeps counting across snapshots", () => {
    const stats = new RuntimeStats();
    stats.add("db.insert.x");
    stats.add("db.insert.x", 2);
    stats.add("bus.publish.call.proposed");
    expect(stats.snapshot().counters).toEqual({ "db.insert.x": 3, "bus.publish.call.proposed": 1 });
    stats.add("db.insert.x");
    expect(stats.snapshot().counters["db.insert.x"]).toBe(4);
  });

  it("records no spans without a capacity, and hands spans over once with one", () => {
    const off = new RuntimeStats();
    off.record("db", "insert", 1, 2);
    expect(off.tracing).toBe(false);
    expect(off.snapshot().trace).toEqual([]);

    const on = new RuntimeStats({ traceCapacity: 2 });
    on.record("db", "a", 1, 2);
    on.record("in", "b", 2, 3);
    on.record("out", "c", 3, 4);
    const first = on.snapshot();
    // Beyond the capacity the oldest span goes, and the loss is counted.
    expect(first.trace).toEqual([
      ["in", "b", 2, 3],
      ["out", "c", 3, 4],
    ]);
    expect(first.counters["stats.trace_dropped"]).toBe(1);
    expect(on.snapshot().trace).toEqual([]);
  });

  it("stamps microseconds on the wall clock", () => {
    const before = Date.now() * 1_000;
    const now = epochMicros();
    expect(now).toBeGreaterThanOrEqual(before - 1_000);
    expect(now).toBeLessThan(before + 1_000_000);
  });
});
