import { readdirSync, readFileSync } from "node:fs";

/** Clock ticks per second of /proc's utime and stime (USER_HZ, 100 on every Linux this runs on). */
const TICKS_PER_SECOND = 100;

/** CPU time (user + system) of one process in milliseconds, or undefined once it has exited. */
export function processCpuMs(pid: number): number | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  // The command name (field 2) may contain spaces and parentheses: fields are counted after its closing one.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(fields[11]) + Number(fields[12])) * 1_000) / TICKS_PER_SECOND;
}

/** Pids of the processes whose command line matches `pattern` (e.g. every PostgreSQL backend). */
export function pidsMatching(pattern: RegExp): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    let cmdline: string;
    try {
      cmdline = readFileSync(`/proc/${entry}/cmdline`, "utf8").replace(/\0/g, " ");
    } catch {
      continue;
    }
    if (pattern.test(cmdline)) pids.push(Number(entry));
  }
  return pids;
}

/**
 * A named set of processes whose CPU is summed: a fixed pid (a service) or every process matching a pattern,
 * looked up at each reading (PostgreSQL forks a backend per connection).
 */
export type CpuGroup = { pids: readonly number[] } | { pattern: RegExp };

/** CPU milliseconds of every process of every group now, by pid: read twice and give both to {@link cpuSpent}. */
export function readCpu(groups: Record<string, CpuGroup>): Record<string, Map<number, number>> {
  const out: Record<string, Map<number, number>> = {};
  for (const [name, group] of Object.entries(groups)) {
    const pids = "pids" in group ? group.pids : pidsMatching(group.pattern);
    const reading = new Map<number, number>();
    for (const pid of pids) {
      const ms = processCpuMs(pid);
      if (ms !== undefined) reading.set(pid, ms);
    }
    out[name] = reading;
  }
  return out;
}

/**
 * CPU milliseconds each group spent between two readings, process by process: what a process present in both
 * spent, and all of a process that started in between. A process that exited in between (a PostgreSQL backend
 * whose connection closed) is left out rather than subtracted, so a group's figure can fall short but is never
 * negative. A pid reused in between counts as new when its CPU went down.
 */
export function cpuSpent(before: Record<string, Map<number, number>>, after: Record<string, Map<number, number>>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [name, now] of Object.entries(after)) {
    let spent = 0;
    for (const [pid, ms] of now) {
      const then = before[name]?.get(pid);
      spent += then === undefined || then > ms ? ms : ms - then;
    }
    out[name] = spent;
  }
  return out;
}

/** The processes of the dev stack's servers: the NATS server, FerretDB and PostgreSQL (all its backends). */
export const SERVER_CPU_GROUPS: Record<string, CpuGroup> = {
  nats: { pattern: /(^|\/)nats-server( |$)/ },
  ferretdb: { pattern: /(^|\/)ferretdb( |$)/ },
  postgres: { pattern: /^postgres(:| )/ },
};

/** The machine's CPU time in clock ticks, summed over its cores: busy, and in all (busy, idle and waiting on I/O). */
export interface MachineCpu {
  busy: number;
  total: number;
}

/** Reads the aggregate `cpu` line of `/proc/stat` (see {@link parseProcStat}). */
export function readMachineCpu(): MachineCpu {
  return parseProcStat(readFileSync("/proc/stat", "utf8"));
}

/**
 * The machine's CPU time from the text of `/proc/stat`: its first line, `cpu  user nice system idle iowait irq
 * softirq steal …`. Idle and iowait are not busy; steal (time the hypervisor gave to another guest) is, as the
 * work waited for it. Guest time is already inside user and nice, so the fields after steal are not added again.
 */
export function parseProcStat(text: string): MachineCpu {
  const line = text.split("\n").find((l) => l.startsWith("cpu "));
  if (!line) throw new Error("/proc/stat has no aggregate cpu line");
  const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = line.trim().split(/\s+/).slice(1).map(Number);
  const busy = user + nice + system + irq + softirq + steal;
  return { busy, total: busy + idle + iowait };
}

/** The share of the machine's CPU time that was busy between two readings (0 to 1). */
export function busyShare(before: MachineCpu, after: MachineCpu): number {
  const total = after.total - before.total;
  return total > 0 ? (after.busy - before.busy) / total : 0;
}
