import { describe, expect, it } from "vitest";
import { busyShare, cpuSpent, parseProcStat, processCpuMs, readCpu, readMachineCpu } from "./process-cpu.js";

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

describe("the machine's CPU", () => {
  it("counts user, nice, system, irq, softirq and steal as busy, idle and iowait as not, and guest time once", () => {
    const text = "cpu  100 5 20 700 30 1 2 7 40 0\ncpu0 50 2 10 350 15 1 1 3 20 0\nintr 12345\n";
    expect(parseProcStat(text)).toEqual({ busy: 135, total: 865 });
  });

  it("refuses a text without the aggregate line rather than reading a core's", () => {
    expect(() => parseProcStat("cpu0 50 2 10 350 15 1 1 3\n")).toThrow(/aggregate/);
  });

  it("gives the busy share between two readings, and 0 when no time passed", () => {
    expect(busyShare({ busy: 100, total: 400 }, { busy: 250, total: 600 })).toBe(0.75);
    expect(busyShare({ busy: 100, total: 400 }, { busy: 100, total: 400 })).toBe(0);
    const now = readMachineCpu();
    expect(now.busy).toBeGreaterThan(0);
    expect(now.total).toBeGreaterThanOrEqual(now.busy);
  });
});
