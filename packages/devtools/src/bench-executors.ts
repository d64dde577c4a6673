/**
 * Executor scaling benchmark: runs an I/O-bound tool (`bench_sleep`, 20 ms by default, one ledger effect per
 * execution) with 1, 2 and 4 executor processes sharing one durable consumer, and prints throughput per
 * executor count, the scaling relative to one executor, the CPU per call of each process (the executors summed)
 * and how busy the machine's cores were, and the number of keys with more than one effect in the tool's own
 * ledger. Median of several runs per executor count.
 *
 * Executor capacity must be what limits throughput for the figures to say anything about scaling, hence one
 * slot per executor by default; with more slots (`--slots 4`) the shared machine (CPU, the database) saturates
 * first and the figures show where.
 *
 * `--via bus` (default) measures the executor tier: signed authorizations are published straight to the
 * stream (as policy does) and each call ends when its terminal event arrives; audit keeps consuming every
 * event. `--via api` measures the whole pipeline from the orchestrator's API instead.
 *
 * Options: `--help` (USAGE below).
 */
import type { ToolRef } from "@toolgate/contracts";
import { ExecutorDriver } from "@toolgate/testkit/executor-driver";
import { Stack } from "@toolgate/testkit/stack";
import { duplicateEffects } from "@toolgate/test-toolsets";
import { MongoClient } from "mongodb";
import { commandLineOrExit } from "./command-line.js";
import { stopOnInterrupt } from "./interrupts.js";
import { busyShare, cpuSpent, readCpu, readMachineCpu, SERVER_CPU_GROUPS, type CpuGroup, type MachineCpu } from "./process-cpu.js";

/** The benchmark's own process: its callers share the cores with the stack. */
const CLIENT_CPU = "bench client";

const USAGE = `usage: node packages/devtools/dist/bench-executors.js [--executors 1,2,4] [--runs 3] [--duration 10] [--sleep-ms 20]
       [--slots 1] [--clients-per-slot 2] [--via bus|api] [--warmup 20]
Executor scaling with an I/O-bound tool (see the README, "Performance").`;

const args = commandLineOrExit("bench-executors", USAGE, {
  executors: { type: "string", default: "1,2,4" },
  runs: { type: "string", default: "3" },
  duration: { type: "string", default: "10" },
  "sleep-ms": { type: "string", default: "20" },
  slots: { type: "string", default: "1" },
  "clients-per-slot": { type: "string", default: "2" },
  via: { type: "string", default: "bus" },
  /**
   * Seconds of load before the measured ones. With one slot each, an executor serves ~30 calls a second: after the
   * 2 s this benchmark used until 2026-12-05 the executors were still being compiled and spent ~60 % more CPU per
   * call, which the cores, not the executors, then limited (README, "Performance").
   */
  warmup: { type: "string", default: "20" },
});

const NATS_URL = process.env.TOOLGATE_TEST_NATS_URL ?? process.env.NATS_URL ?? "nats://127.0.0.1:4222";
const MONGO_URL = process.env.TOOLGATE_TEST_MONGO_URL ?? process.env.MONGO_URL ?? "mongodb://127.0.0.1:27117";
/** Replicas of the stack's streams: 3 on the cluster of `./infra/dev.sh up --cluster`, which exports it. */
const STREAM_REPLICAS = Number(process.env.STREAM_REPLICAS ?? "1");

interface CallResponse {
  run_id: string;
  results: { status: string; result?: { ok: boolean } }[];
}

interface Measured {
  executors: number;
  calls: number;
  failed: number;
  rate: number;
  p50: number;
  effects: number;
  duplicates: number;
  /** CPU ms per call over the measured window, by process group (the executors summed), and the whole stack's. */
  cpu: Record<string, number>;
  stackCpu: number;
  /** Share of the machine's CPU time that was busy over the window (0 to 1): near 1, the cores are what limits. */
  busy: number;
}

interface Counts {
  ok: number;
  failed: number;
  latencies: number[];
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

/** One host loop: calls bench_sleep back to back through the public API until `until`, in its own run. */
async function apiClient(stack: Stack, sleepMs: number, until: number, counts: Counts, measureFrom: number): Promise<void> {
  let runId: string | undefined;
  for (let n = 0; performance.now() < until; n++) {
    const started = performance.now();
    const response = await stack.api<CallResponse>("POST", "/v1/tool-calls", {
      ...(runId ? { run_id: runId } : {}),
      calls: [{ id: `c${n}`, name: "bench_sleep", arguments: { ms: sleepMs, n } }],
      wait_ms: 30_000,
    });
    runId ??= response.body.run_id;
    if (started < measureFrom) continue;
    const result = response.body.results?.[0];
    if (response.status === 200 && result?.status === "done" && result.result?.ok === true) counts.ok += 1;
    else counts.failed += 1;
    counts.latencies.push(performance.now() - started);
  }
}

/** One caller on the bus: publishes a signed authorization and waits for its terminal event, back to back. */
async function busClient(
  driver: ExecutorDriver,
  tool: ToolRef,
  sleepMs: number,
  until: number,
  counts: Counts,
  measureFrom: number,
  id: number,
): Promise<void> {
  for (let n = 0; performance.now() < until; n++) {
    const started = performance.now();
    const ended = await driver.call(tool, { ms: sleepMs, n: id * 1_000_000 + n });
    if (started < measureFrom) continue;
    if (ended.type === "completed" && ended.result.ok) counts.ok += 1;
    else counts.failed += 1;
    counts.latencies.push(ended.ms);
  }
}

/** The contract reference of bench_sleep as the executor registered it (from its start-up log). */
function benchSleepRef(stack: Stack): ToolRef {
  const configured = stack
    .process("executor-1")
    .logs()
    .find((l) => l.msg === "executor configured") as { tools?: ToolRef[] } | undefined;
  const ref = configured?.tools?.find((t) => t.name === "bench_sleep");
  if (!ref) throw new Error("the executor did not report bench_sleep");
  return { name: ref.name, version: ref.version, hash: ref.hash };
}

async function oneRun(executors: number, run: number): Promise<Measured> {
  const sleepMs = Number(args["sleep-ms"]);
  const slots = Number(args.slots);
  const viaBus = args.via !== "api";
  const stack = await Stack.start({
    natsUrl: NATS_URL,
    mongoUrl: MONGO_URL,
    streamReplicas: STREAM_REPLICAS,
    toolsets: ["bench"],
    executors,
    logLevel: "warn",
    // The executor's start-up line (info) names the contracts it serves.
    env: { executor: { EXECUTOR_SLOTS: String(slots), LOG_LEVEL: "info" } },
  });
  const forget = stopOnInterrupt(stack);
  const mongo = await new MongoClient(MONGO_URL).connect();
  let driver: ExecutorDriver | undefined;
  try {
    if (viaBus) {
      // Calls published straight to the bus were never proposed: the orchestrator has nothing to do with them.
      await stack.process("orchestrator").stop();
      driver = await ExecutorDriver.connect(stack, NATS_URL);
    }
    const tool = viaBus ? benchSleepRef(stack) : undefined;
    const clients = executors * slots * Number(args["clients-per-slot"]);
    const warmUpMs = Number(args.warmup) * 1_000;
    const started = performance.now();
    const measureFrom = started + warmUpMs;
    const until = measureFrom + Number(args.duration) * 1_000;
    const counts: Counts = { ok: 0, failed: 0, latencies: [] };
    // CPU from the end of the warm-up to the last call's end: each service (the executors as one), each server.
    const cpuGroups: Record<string, CpuGroup> = {
      executors: { pids: stack.processes.filter((p) => p.name.startsWith("executor")).map((p) => p.pid) },
      ...Object.fromEntries(stack.processes.filter((p) => !p.name.startsWith("executor") && !p.exited).map((p) => [p.name, { pids: [p.pid] }])),
      ...SERVER_CPU_GROUPS,
    };
    let atStart: { processes: Record<string, Map<number, number>>; machine: MachineCpu; client: NodeJS.CpuUsage } | undefined;
    const warmedUp = setTimeout(() => {
      atStart = { processes: readCpu(cpuGroups), machine: readMachineCpu(), client: process.cpuUsage() };
    }, warmUpMs);
    await Promise.all(
      Array.from({ length: clients }, (_, i) =>
        driver && tool ? busClient(driver, tool, sleepMs, until, counts, measureFrom, i) : apiClient(stack, sleepMs, until, counts, measureFrom),
      ),
    );
    const seconds = (performance.now() - measureFrom) / 1_000;
    clearTimeout(warmedUp);
    if (!atStart) throw new Error("the run ended before its warm-up did");
    const clientUsage = process.cpuUsage(atStart.client);
    const spent = { ...cpuSpent(atStart.processes, readCpu(cpuGroups)), [CLIENT_CPU]: (clientUsage.user + clientUsage.system) / 1_000 };
    const busy = busyShare(atStart.machine, readMachineCpu());
    const cpu = Object.fromEntries(Object.entries(spent).map(([name, ms]) => [name, ms / Math.max(1, counts.ok)]));
    const stackCpu = Object.entries(cpu).reduce((sum, [name, ms]) => (name === CLIENT_CPU ? sum : sum + ms), 0);
    const effects = await duplicateEffects(mongo.db(`${stack.name}_tools`));
    const measured = {
      executors,
      calls: counts.ok,
      failed: counts.failed,
      rate: counts.ok / seconds,
      p50: counts.latencies.length > 0 ? median(counts.latencies) : Number.NaN,
      effects: effects.total,
      duplicates: effects.duplicates.length,
      cpu,
      stackCpu,
      busy,
    };
    console.log(
      `  run ${run + 1}: ${executors} executor(s) × ${slots} slots, ${clients} clients: ${measured.rate.toFixed(0)} calls/s` +
        ` p50=${measured.p50.toFixed(1)}ms (ok=${measured.calls} failed=${measured.failed}) effects=${measured.effects} duplicate keys=${measured.duplicates}`,
    );
    console.log(
      `    CPU ms per call: ${Object.entries(cpu)
        .map(([name, ms]) => `${name} ${ms.toFixed(2)}`)
        .join(", ")}; whole stack ${stackCpu.toFixed(2)}; the cores were ${(busy * 100).toFixed(0)} % busy`,
    );
    return measured;
  } finally {
    await driver?.close();
    forget();
    await stack.stop();
    await mongo.db(`${stack.name}_runtime`).dropDatabase();
    await mongo.db(`${stack.name}_tools`).dropDatabase();
    await mongo.close();
  }
}

async function main(): Promise<void> {
  const counts = args.executors.split(",").map((n) => Number(n.trim()));
  const rows: { executors: number; rate: number; p50: number; failed: number; duplicates: number; stackCpu: number; busy: number }[] = [];
  console.log(
    `bench_sleep ${args["sleep-ms"]} ms, ${args.slots} slots per executor, ${args.runs} runs of ${args.duration} s each, via ${args.via === "api" ? "the orchestrator's API" : "the bus"}`,
  );
  for (const executors of counts) {
    const runs: Measured[] = [];
    for (let i = 0; i < Number(args.runs); i++) runs.push(await oneRun(executors, i));
    rows.push({
      executors,
      rate: median(runs.map((r) => r.rate)),
      p50: median(runs.map((r) => r.p50)),
      failed: runs.reduce((sum, r) => sum + r.failed, 0),
      duplicates: runs.reduce((sum, r) => sum + r.duplicates, 0),
      stackCpu: median(runs.map((r) => r.stackCpu)),
      busy: median(runs.map((r) => r.busy)),
    });
  }
  const base = rows.find((r) => r.executors === 1)?.rate ?? rows[0]!.rate / rows[0]!.executors;
  console.log(`\nmedian throughput (bench_sleep ${args["sleep-ms"]} ms, ${args.slots} slots per executor):`);
  for (const row of rows) {
    const scaling = row.rate / (base * row.executors);
    console.log(
      `  ${String(row.executors).padStart(2)} executor(s): ${row.rate.toFixed(0).padStart(5)} calls/s  p50 ${row.p50.toFixed(1)} ms  ` +
        `scaling ${scaling.toFixed(2)}× of linear  CPU ${row.stackCpu.toFixed(1)} ms per call, cores ${(row.busy * 100).toFixed(0)} % busy  ` +
        `failed=${row.failed}  duplicate effects=${row.duplicates}`,
    );
  }
  const duplicates = rows.reduce((sum, r) => sum + r.duplicates, 0);
  console.log(`  duplicate effects in all runs: ${duplicates}`);
  if (duplicates > 0) process.exit(1);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
