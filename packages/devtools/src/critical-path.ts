import type { ServiceStats } from "@toolgate/testkit";

type TraceEntry = ServiceStats["trace"][number];

/** One call as the client saw it: when it sent the request and when the answer arrived (µs since the epoch). */
export interface ClientCall {
  callId: string;
  startUs: number;
  endUs: number;
}

/** One step of a call's critical path: work in one service, or a hop over the bus. */
export interface Step {
  /** `orchestrator: request → proposed`, `bus: proposed → policy`, … */
  name: string;
  /** When the step began (µs since the epoch). */
  startUs: number;
  durationUs: number;
  /**
   * Database commands (`db.…`) and ledger claims (`js.claim.…`) that ran entirely inside this step, in start
   * order (a service step only).
   */
  commands: { name: string; startUs: number; endUs: number }[];
}

/** Which database commands are the tool's own (the benchmark tools' effect ledger), not the runtime's. */
export type CommandOwner = (command: string) => "runtime" | "tool";

/**
 * The critical path of one successful call from the client's request to its answer, rebuilt from the spans
 * the services recorded (deliveries, publishes and database commands, on one machine's wall clock):
 * orchestrator → proposed → policy → authorized → executor → completed → orchestrator → answer. Undefined when
 * a span is missing (the call failed, or a trace overflowed).
 */
export function criticalPath(call: ClientCall, traces: { orchestrator: TraceEntry[]; policy: TraceEntry[]; executor: TraceEntry[] }): Step[] | undefined {
  const find = (trace: TraceEntry[], kind: "in" | "out", type: string): TraceEntry | undefined => {
    const prefix = `${call.callId}:${type}:`;
    return trace.find((e) => e[0] === kind && e[1].startsWith(prefix));
  };
  const proposedOut = find(traces.orchestrator, "out", "proposed");
  const proposedIn = find(traces.policy, "in", "proposed");
  const authorizedOut = find(traces.policy, "out", "authorized");
  const authorizedIn = find(traces.executor, "in", "authorized");
  const completedOut = find(traces.executor, "out", "completed");
  const completedIn = find(traces.orchestrator, "in", "completed");
  if (!proposedOut || !proposedIn || !authorizedOut || !authorizedIn || !completedOut || !completedIn) return undefined;
  const work = (name: string, trace: TraceEntry[], from: number, to: number): Step => {
    // Database commands and ledger claims (JetStream compare-and-set publishes) the step waited for.
    const inside = trace.filter((e) => (e[0] === "db" || e[0] === "js") && e[2] >= from && e[3] <= to).sort((a, b) => a[2] - b[2]);
    return { name, startUs: from, durationUs: to - from, commands: inside.map((e) => ({ name: e[1], startUs: e[2], endUs: e[3] })) };
  };
  const hop = (name: string, from: number, to: number): Step => ({ name, startUs: from, durationUs: to - from, commands: [] });
  return [
    work("orchestrator: request → proposed", traces.orchestrator, call.startUs, proposedOut[2]),
    hop("bus: proposed → policy", proposedOut[2], proposedIn[2]),
    work("policy: proposed → authorized", traces.policy, proposedIn[2], authorizedOut[2]),
    hop("bus: authorized → executor", authorizedOut[2], authorizedIn[2]),
    work("executor: authorized → completed", traces.executor, authorizedIn[2], completedOut[2]),
    hop("bus: completed → orchestrator", completedOut[2], completedIn[2]),
    work("orchestrator: completed → answer", traces.orchestrator, completedIn[2], call.endUs),
  ];
}

/** How many times the commands had to be waited for one after another: overlapping commands count once. */
export function roundTrips(commands: readonly { startUs: number; endUs: number }[]): number {
  let groups = 0;
  let end = -Infinity;
  for (const c of [...commands].sort((a, b) => a.startUs - b.startUs)) {
    if (c.startUs >= end) groups += 1;
    end = Math.max(end, c.endUs);
  }
  return groups;
}

/** How long at least one of the commands was running: the time the step spent waiting for the database. */
export function busyTime(commands: readonly { startUs: number; endUs: number }[]): number {
  let busy = 0;
  let end = -Infinity;
  for (const c of [...commands].sort((a, b) => a.startUs - b.startUs)) {
    busy += Math.max(0, c.endUs - Math.max(c.startUs, end));
    end = Math.max(end, c.endUs);
  }
  return busy;
}

/** A database command, not a ledger claim. */
function isDatabase(command: { name: string }): boolean {
  return !command.name.startsWith("js.");
}

/** A stretch of a step: the service working (or waiting on anything but its database), or one database command. */
export interface Segment {
  /** `work`, or the command's name. */
  name: string;
  medianUs: number;
}

/**
 * A step cut at its database commands, in order: work before the first, each command, the work between, the
 * work after the last. A command that overlaps the previous one counts only for the part after it, so the
 * segments add up to the step's duration.
 */
export function segmentsOf(step: Step, fromUs: number): { name: string; us: number }[] {
  const out: { name: string; us: number }[] = [];
  let at = fromUs;
  for (const c of [...step.commands].sort((a, b) => a.startUs - b.startUs)) {
    out.push({ name: "work", us: Math.max(0, c.startUs - at) });
    const end = Math.max(at, c.endUs);
    out.push({ name: c.name, us: end - Math.max(at, c.startUs) });
    at = end;
  }
  out.push({ name: "work", us: Math.max(0, fromUs + step.durationUs - at) });
  return out;
}

/** The median critical path of many calls: per step the median duration and the most common commands. */
export interface PathSummary {
  calls: number;
  /**
   * Per step: median duration, the usual commands, how many database round trips they took and the median time
   * spent in them, and how many ledger claims (JetStream compare-and-set publishes) it waited for one after another.
   */
  steps: { name: string; medianUs: number; commands: string[]; sequential: number; databaseUs: number; ledger: number; segments: Segment[] }[];
  /** Median and worst number of sequential database round trips per call, the runtime's and the tool's own apart. */
  sequential: Record<"runtime" | "tool", { median: number; max: number }>;
}

export function summarizePaths(paths: readonly Step[][], owner: CommandOwner): PathSummary | undefined {
  const first = paths[0];
  if (!first) return undefined;
  const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
  const steps = first.map((step, i) => {
    const all = paths.map((p) => p[i]!);
    // The most frequent command list stands for the step (calls differ only when a batch happened to form).
    const lists = new Map<string, number>();
    for (const s of all) {
      const key = s.commands.map((c) => c.name).join(" ");
      lists.set(key, (lists.get(key) ?? 0) + 1);
    }
    const common = [...lists].sort((a, b) => b[1] - a[1])[0]![0];
    // Segments are comparable only between calls whose step ran the same commands: the common ones.
    const alike = all.filter((s) => s.commands.map((c) => c.name).join(" ") === common).map((s) => segmentsOf(s, s.startUs));
    const segments = alike[0]!.map((seg, j) => ({ name: seg.name, medianUs: median(alike.map((a) => a[j]!.us)) }));
    return {
      name: step.name,
      medianUs: median(all.map((s) => s.durationUs)),
      commands: common === "" ? [] : common.split(" "),
      sequential: median(all.map((s) => roundTrips(s.commands.filter(isDatabase)))),
      databaseUs: median(all.map((s) => busyTime(s.commands.filter(isDatabase)))),
      ledger: median(all.map((s) => roundTrips(s.commands.filter((c) => !isDatabase(c))))),
      segments,
    };
  });
  const perCall = (who: "runtime" | "tool"): { median: number; max: number } => {
    const counts = paths.map((p) => p.reduce((sum, s) => sum + roundTrips(s.commands.filter((c) => isDatabase(c) && owner(c.name) === who)), 0));
    return { median: median(counts), max: Math.max(...counts) };
  };
  return { calls: paths.length, steps, sequential: { runtime: perCall("runtime"), tool: perCall("tool") } };
}

/**
 * The slowest `fraction` of `paths` (at least one), by their whole duration from request to answer: the calls
 * a tail percentile is made of, to say which steps make them slow.
 */
export function slowest(paths: readonly Step[][], fraction: number): Step[][] {
  const total = (path: readonly Step[]): number => path.reduce((sum, s) => sum + s.durationUs, 0);
  const count = Math.max(1, Math.ceil(paths.length * fraction));
  return [...paths].sort((a, b) => total(b) - total(a)).slice(0, count);
}
