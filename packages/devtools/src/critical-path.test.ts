import { describe, expect, it } from "vitest";
import { busyTime, criticalPath, roundTrips, segmentsOf, slowest, summarizePaths, type Step } from "./critical-path.js";

describe("roundTrips", () => {
  it("counts overlapping commands once and back-to-back ones each", () => {
    expect(roundTrips([])).toBe(0);
    expect(
      roundTrips([
        { startUs: 0, endUs: 10 },
        { startUs: 5, endUs: 12 },
        { startUs: 12, endUs: 20 },
        { startUs: 30, endUs: 31 },
      ]),
    ).toBe(3);
  });
});

describe("busyTime", () => {
  it("counts the time any command ran, overlaps once", () => {
    expect(
      busyTime([
        { startUs: 0, endUs: 10 },
        { startUs: 5, endUs: 12 },
        { startUs: 20, endUs: 25 },
      ]),
    ).toBe(17);
  });
});

describe("criticalPath", () => {
  const id = "call_X";
  const traces = {
    orchestrator: [
      ["out", `${id}:proposed:1`, 100, 150],
      ["db", "db.insert.rt.calls", 120, 400],
      ["in", `${id}:completed:1`, 900, 950],
      ["db", "db.insert.rt.call_results", 910, 1_300],
    ],
    policy: [
      ["in", `${id}:proposed:1`, 200, 260],
      ["out", `${id}:authorized:1`, 250, 300],
    ],
    executor: [
      ["in", `${id}:authorized:1`, 350, 890],
      ["js", "js.claim.rt_HOST_CALLS", 352, 358],
      ["db", "db.insert.rt.idempotency_keys", 360, 500],
      ["db", "db.insert.tools.effects", 510, 600],
      ["db", "db.insert.rt.idempotency_keys_steps", 610, 800],
      ["out", `${id}:completed:1`, 820, 880],
    ],
  } satisfies Record<string, ["db" | "in" | "out" | "js", string, number, number][]>;

  it("follows one call through the services and counts the commands each step waited for", () => {
    const steps = criticalPath({ callId: id, startUs: 0, endUs: 1_000 }, traces)!;
    expect(steps.map((s) => [s.name, s.durationUs])).toEqual([
      ["orchestrator: request → proposed", 100],
      ["bus: proposed → policy", 100],
      ["policy: proposed → authorized", 50],
      ["bus: authorized → executor", 100],
      ["executor: authorized → completed", 470],
      ["bus: completed → orchestrator", 80],
      ["orchestrator: completed → answer", 100],
    ]);
    // Written behind: the call record and the attach end after the steps they started in.
    expect(steps[0]!.commands).toEqual([]);
    expect(steps[6]!.commands).toEqual([]);
    expect(steps[4]!.commands.map((c) => c.name)).toEqual([
      "js.claim.rt_HOST_CALLS",
      "db.insert.rt.idempotency_keys",
      "db.insert.tools.effects",
      "db.insert.rt.idempotency_keys_steps",
    ]);
    const summary = summarizePaths([steps], (c) => (c.includes(".tools.") ? "tool" : "runtime"))!;
    expect(summary.sequential).toEqual({ runtime: { median: 2, max: 2 }, tool: { median: 1, max: 1 } });
    // The ledger claim is waited for, but it is no database round trip.
    expect(summary.steps[4]).toMatchObject({ sequential: 3, databaseUs: 140 + 90 + 190, ledger: 1 });
    // The executor's step cut at its commands: the work around them adds up with them to the step.
    expect(summary.steps[4]!.segments).toEqual([
      { name: "work", medianUs: 2 },
      { name: "js.claim.rt_HOST_CALLS", medianUs: 6 },
      { name: "work", medianUs: 2 },
      { name: "db.insert.rt.idempotency_keys", medianUs: 140 },
      { name: "work", medianUs: 10 },
      { name: "db.insert.tools.effects", medianUs: 90 },
      { name: "work", medianUs: 10 },
      { name: "db.insert.rt.idempotency_keys_steps", medianUs: 190 },
      { name: "work", medianUs: 20 },
    ]);
    expect(summary.steps[1]!.segments).toEqual([{ name: "work", medianUs: 100 }]);
  });

  it("counts an overlapping command only for the part after the previous one", () => {
    const step = {
      name: "s",
      startUs: 0,
      durationUs: 100,
      commands: [
        { name: "a", startUs: 10, endUs: 50 },
        { name: "b", startUs: 30, endUs: 70 },
      ],
    };
    expect(segmentsOf(step, 0)).toEqual([
      { name: "work", us: 10 },
      { name: "a", us: 40 },
      { name: "work", us: 0 },
      { name: "b", us: 20 },
      { name: "work", us: 30 },
    ]);
  });

  it("gives up on a call whose spans are missing", () => {
    expect(criticalPath({ callId: "call_Y", startUs: 0, endUs: 1 }, traces)).toBeUndefined();
  });
});

describe("slowest", () => {
  const path = (...durations: number[]): Step[] => durations.map((durationUs, i) => ({ name: `step ${i}`, startUs: 0, durationUs, commands: [] }));

  it("keeps the calls whose whole path took longest, not those with the longest single step", () => {
    const paths = [path(10, 10), path(1, 30), path(20, 5), path(15, 15), path(2, 2)];
    expect(slowest(paths, 0.4)).toEqual([path(1, 30), path(15, 15)]);
  });

  it("keeps at least one call", () => {
    expect(slowest([path(1), path(3), path(2)], 0.01)).toEqual([path(3)]);
  });
});
