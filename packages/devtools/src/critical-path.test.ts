import { describe, expect, it } from "vitest";
import { busyTime, criticalPath, roundTrips, summarizePaths } from "./critical-path.js";

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
      ["db", "db.insert.rt.idempotency_keys", 360, 500],
      ["db", "db.insert.tools.effects", 510, 600],
      ["db", "db.insert.rt.idempotency_keys_steps", 610, 800],
      ["out", `${id}:completed:1`, 820, 880],
    ],
  } satisfies Record<string, ["db" | "in" | "out", string, number, number][]>;

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
    expect(steps[4]!.commands.map((c) => c.name)).toEqual(["db.insert.rt.idempotency_keys", "db.insert.tools.effects", "db.insert.rt.idempotency_keys_steps"]);
    const summary = summarizePaths([steps], (c) => (c.includes(".tools.") ? "tool" : "runtime"))!;
    expect(summary.sequential).toEqual({ runtime: { median: 2, max: 2 }, tool: { median: 1, max: 1 } });
    expect(summary.steps[4]).toMatchObject({ sequential: 3, databaseUs: 140 + 90 + 190 });
  });

  it("gives up on a call whose spans are missing", () => {
    expect(criticalPath({ callId: "call_Y", startUs: 0, endUs: 1 }, traces)).toBeUndefined();
  });
});
