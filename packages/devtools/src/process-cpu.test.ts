import { describe, expect, it } from "vitest";
import { cpuSpent, processCpuMs, readCpu } from "./process-cpu.js";

describe("cpuSpent", () => {
  it("adds up what each process spent, counting a new one whole and leaving out one that exited", () => {
    const before = {
      postgres: new Map([
        [10, 500],
        [11, 300],
        [12, 900],
      ]),
      audit: new Map([[20, 40]]),
    };
    // 10 spent 25; 11 exited (its 300 must not be subtracted); 13 is a backend that started in between.
    const after = {
      postgres: new Map([
        [10, 525],
        [13, 7],
      ]),
      audit: new Map([[20, 41]]),
    };
    expect(cpuSpent(before, after)).toEqual({ postgres: 25 + 7, audit: 1 });
  });

  it("counts a reused pid whose CPU went down as a new process, never as negative time", () => {
    expect(cpuSpent({ nats: new Map([[30, 1_000]]) }, { nats: new Map([[30, 12]]) })).toEqual({ nats: 12 });
  });
});

describe("readCpu", () => {
  it("reads this process's own CPU by pid, and skips a pid that does not exist", () => {
    const reading = readCpu({ self: { pids: [process.pid, 2 ** 22 + 1] } });
    expect([...reading.self!.keys()]).toEqual([process.pid]);
    // A process's CPU only grows: what was read is no more than what a later read finds.
    expect(reading.self!.get(process.pid)).toBeLessThanOrEqual(processCpuMs(process.pid)!);
  });
});
