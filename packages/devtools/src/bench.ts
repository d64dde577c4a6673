/**
 * End-to-end benchmark: drives tool calls through the four real services (orchestrator API → policy → executor,
 * audit reading every event) with the no-op benchmark tool, and accounts for every millisecond: throughput,
 * latency idle and under a steady load, the critical path of an idle call step by step (with the database
 * round trips each step waited for), database commands, JetStream publishes and CPU per call for each service
 * and each server (NATS, FerretDB, PostgreSQL), and the sequential scans PostgreSQL did. Duplicate executions
 * are counted by the tools themselves: `bench_noop` counts its executions per key in memory (a no-op writes
 * nothing), `bench_sleep` records each effect in its ledger. Median of several runs.
 *
 * `--baseline` also runs, in the same invocation and before each run, a bare JetStream pipeline with
 * Toolgate's hops and no logic or database, and prints Toolgate's ratio to it. `--bare-messages toolgate` has that
 * pipeline make every message a no-op host call makes in Toolgate (a ledger claim, five events; see
 * `BareMessages`), so the ratio to it leaves out what the bus costs for the extra messages.
 *
 * `--otlp-compare` measures what exporting spans costs instead: it starts two stacks side by side, one with every
 * service exporting its spans over OTLP/HTTP (protobuf, Toolgate's batch defaults) to a sink on loopback that
 * answers every export and counts it, and loads them in turn, `--runs` pairs of `--duration` seconds each (every
 * other pair the exporting one first). It prints each pair's ratio of sustained throughput, their median, and the
 * servers' CPU per call in each pair as a gauge of how much the machine moved. `--otlp-env` gives the exporting
 * stack more `OTEL_*` settings (`OTEL_TRACES_SAMPLER=always_off,OTEL_BSP_SCHEDULE_DELAY=5000`), to tell which
 * part of that cost is what.
 *
 * `--compare <checkout>` takes the same turns between a stack of another built checkout of the repository (the
 * base of a change, say: `git worktree add ../base main`, then `pnpm install && pnpm build` there) and one of this
 * checkout, so a change's effect is a ratio measured side by side. `--concurrency 1` compares idle calls,
 * `--rate <calls/s>` latency under a steady load (an open loop at that rate). `--env NAME=v,…` sets the services
 * of this checkout's stack only: `--compare . --env X=1` compares a setting against its default.
 *
 * The paced phase starts calls at a fixed rate whatever their latency. By default (`--rate auto`) that rate is
 * half the throughput just measured, so it shows latency under a steady load the stack can carry.
 *
 * Options: `--help` (USAGE below).
 */
import { existsSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { createServer } from "node:http";
import { randomUUID } from "node:crypto";
import { Stack } from "@toolgate/testkit/stack";
import type { ServiceStats } from "@toolgate/testkit";
import { duplicateEffects } from "@toolgate/test-toolsets";
import { MongoClient } from "mongodb";
import { Pool } from "undici";
import { commandLineOrExit, envPairs } from "./command-line.js";
import { runBarePipeline, type BareMessages, type BarePipelineResult } from "./bare-pipeline.js";
import { criticalPath, slowest, summarizePaths, type ClientCall, type PathSummary, type Step } from "./critical-path.js";
import { busyShare, cpuSpent, readCpu, readMachineCpu, SERVER_CPU_GROUPS, type CpuGroup } from "./process-cpu.js";
import { stopOnInterrupt } from "./interrupts.js";
import { readTableStats, tableDeltas, type TableStats } from "./postgres-stats.js";

const USAGE = `usage: node packages/devtools/dist/bench.js [--runs 3] [--duration 15] [--concurrency 64] [--rate auto|<calls/s>]
       [--executors 1] [--tool bench_noop|bench_sleep] [--sleep-ms 20] [--idle-calls 300] [--warmup 5000] [--warmup-idle 2000] [--baseline] [--bare-messages hops|toolgate] [--otlp-compare]
       [--otlp-env OTEL_X=v,…] [--env NAME=v,…] [--compare <checkout>] [--mongo-rtt-ms 0.5] [--idempotency-keys] [--json <file>]
Drives no-op tool calls through the four services and accounts for every millisecond (see the README, "Performance").`;

const args = commandLineOrExit("bench", USAGE, {
  runs: { type: "string", default: "3" },
  duration: { type: "string", default: "15" },
  concurrency: { type: "string", default: "64" },
  rate: { type: "string", default: "auto" },
  executors: { type: "string", default: "1" },
  tool: { type: "string", default: "bench_noop" },
  "sleep-ms": { type: "string", default: "20" },
  "idle-calls": { type: "string", default: "300" },
  /** Calls each stack serves before anything is measured (see {@link warmUp}). */
  warmup: { type: "string", default: "5000" },
  /** Calls each stack then serves one at a time before anything is measured (see {@link warmUp}). */
  "warmup-idle": { type: "string", default: "2000" },
  baseline: { type: "boolean", default: false },
  "bare-messages": { type: "string", default: "hops" },
  "otlp-compare": { type: "boolean", default: false },
  "otlp-env": { type: "string", default: "" },
  env: { type: "string", default: "" },
  /** Another built checkout of the repository, whose stack takes turns with this checkout's. */
  compare: { type: "string" },
  "mongo-rtt-ms": { type: "string", default: "0.5" },
  /** Every submission carries its own `Idempotency-Key`, as a careful host's does (the chaos suite's client). */
  "idempotency-keys": { type: "boolean", default: false },
  json: { type: "string" },
});

const OTLP_ENV = otlpEnv(args["otlp-env"]);
const BARE_MESSAGES = bareMessages(args["bare-messages"]);
/** How the output names a bare pipeline that makes Toolgate's messages. */
const BARE_LABEL = BARE_MESSAGES === "toolgate" ? " (Toolgate's messages)" : "";
const EXTRA_ENV = extraEnv(args.env);

const NATS_URL = process.env.TOOLGATE_TEST_NATS_URL ?? process.env.NATS_URL ?? "nats://127.0.0.1:4222";
const MONGO_URL = process.env.TOOLGATE_TEST_MONGO_URL ?? process.env.MONGO_URL ?? "mongodb://127.0.0.1:27117";
/** Replicas of the stack's streams: 3 on the cluster of `./infra/dev.sh up --cluster`, which exports it. */
const STREAM_REPLICAS = Number(process.env.STREAM_REPLICAS ?? "1");
/** Where FerretDB keeps its data (infra/dev.sh's default); used only to read PostgreSQL's table counters. */
const PG_URL = process.env.TOOLGATE_FERRETDB_PG_URL ?? "postgres://postgres@127.0.0.1:5432/toolgate_ferretdb";
/** Spans each service keeps for the critical-path accounting of the idle phase (a few per call). */
const TRACE_CAPACITY = 200_000;

interface CallResponse {
  run_id: string;
  results: { call_id: string; status: string; result?: { ok: boolean } }[];
}

interface PhaseResult {
  calls: number;
  failed: number;
  seconds: number;
  latencies: number[];
  /** Successful calls with their wall-clock start and end, for the critical-path accounting. */
  timed: ClientCall[];
}

const epochMicros = (): number => (performance.timeOrigin + performance.now()) * 1_000;

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** The median; of an even count, the mean of the two middle values. */
function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

/**
 * A host calling tools through the public API from one run of its own, over a pooled keep-alive connection
 * (the benchmark's own HTTP client must cost little: it shares the machine with the stack).
 */
class Client {
  #runId: string | undefined;
  #n = 0;
  readonly #key = `bench-${randomUUID()}`;
  constructor(
    private readonly pool: Pool,
    private readonly apiKey: string,
    private readonly tool: string,
    private readonly sleepMs: number,
    private readonly keyed: boolean,
  ) {}

  /** One tool call, submitted and awaited; its latency in ms and, when it succeeded, its call id. */
  async call(): Promise<{ ms: number; ok: boolean; call?: ClientCall }> {
    const n = this.#n++;
    const argumentsObject = this.tool === "bench_sleep" ? { ms: this.sleepMs, n } : { n };
    const startUs = epochMicros();
    const started = performance.now();
    let status: number;
    let body: CallResponse;
    try {
      const response = await this.pool.request({
        path: "/v1/tool-calls",
        method: "POST",
        headers: {
          authorization: `Bearer ${this.apiKey}`,
          "content-type": "application/json",
          ...(this.keyed ? { "idempotency-key": `${this.#key}-${n}` } : {}),
        },
        body: JSON.stringify({
          ...(this.#runId ? { run_id: this.#runId } : {}),
          calls: [{ id: `c${n}`, name: this.tool, arguments: argumentsObject }],
          wait_ms: 30_000,
        }),
      });
      status = response.statusCode;
      body = (await response.body.json()) as CallResponse;
    } catch {
      // A refused or reset connection is a failed call, counted like any other.
      return { ms: performance.now() - started, ok: false };
    }
    const ms = performance.now() - started;
    const endUs = epochMicros();
    this.#runId ??= body.run_id;
    const result = body.results?.[0];
    const ok = status === 200 && result?.status === "done" && result.result?.ok === true;
    return { ms, ok, ...(ok && result ? { call: { callId: result.call_id, startUs, endUs } } : {}) };
  }
}

/** Closed loop: `concurrency` clients call back to back for `seconds` (or `maxCalls` in all). */
async function closedLoop(clients: () => Client, concurrency: number, seconds: number, maxCalls = Infinity): Promise<PhaseResult> {
  const result: PhaseResult = { calls: 0, failed: 0, seconds: 0, latencies: [], timed: [] };
  const end = performance.now() + seconds * 1000;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      const client = clients();
      while (performance.now() < end && result.latencies.length < maxCalls) {
        const r = await client.call();
        result.latencies.push(r.ms);
        if (r.call) result.timed.push(r.call);
        if (!r.ok) result.failed++;
      }
    }),
  );
  result.calls = result.latencies.length;
  result.seconds = (performance.now() - started) / 1000;
  return result;
}

/** Open loop: calls started at a fixed rate regardless of how fast they finish. */
async function openLoop(clients: () => Client, rate: number, seconds: number): Promise<PhaseResult> {
  const result: PhaseResult = { calls: 0, failed: 0, seconds: 0, latencies: [], timed: [] };
  const idle: Client[] = Array.from({ length: 256 }, clients);
  const pending: Promise<void>[] = [];
  const started = performance.now();
  const total = Math.round(rate * seconds);
  for (let i = 0; i < total; i++) {
    const due = started + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((resolve) => setTimeout(resolve, wait));
    const client = idle.pop() ?? clients();
    pending.push(
      client.call().then((r) => {
        idle.push(client);
        result.latencies.push(r.ms);
        if (r.call) result.timed.push(r.call);
        if (!r.ok) result.failed++;
      }),
    );
  }
  await Promise.all(pending);
  result.calls = result.latencies.length;
  result.seconds = (performance.now() - started) / 1000;
  return result;
}

/**
 * Serves `--warmup` calls at the load's concurrency, then `--warmup-idle` one at a time, before anything is measured,
 * so that what is measured is the stack's steady state. V8 compiles a function's optimized code only after it has
 * run many times, in background threads that share the two cores; after the warm-up this benchmark used until
 * 2026-12-05 (2 s at 16 in flight, ~600 calls) a stack still spent ~40 % more CPU per idle call and answered idle
 * calls ~40 % later than after 5,000 (README, "Performance"). The calls one at a time take the paths only idle
 * calls take (a lone document goes as `insertOne`), and they settle slowly: on 2026-12-07 one stack, after 5,000
 * calls at 64 in flight, answered windows of 600 idle calls in p50 3.78, 3.49, 3.28, 3.06 and then ~3.0 ms, at 7.0
 * falling to 5.4 ms of CPU per call, while V8 compiled the idle paths (the orchestrator finished 42, 34, 11, 13 and
 * then fewer optimizing compiles per window: the driver's `insertOne` and pool, the HTTP parser). The 100 calls one
 * at a time of the warm-up before had the idle phase measure the first of those windows. The p50 of the first 200
 * of them is printed (`right after the load`): what a host sees in the first seconds of quiet after a burst. The
 * warm-up's spans are handed over (and dropped) before those calls: the first window with the load's trace held
 * was 4.69 ms. The bare pipeline warms up alike: 1 s at 64 in flight,
 * then `--warmup-idle` calls one at a time.
 */
async function warmUp(bench: Pick<BenchStack, "clients" | "stack">): Promise<PhaseSummary> {
  const loaded = await closedLoop(bench.clients, Number(args.concurrency), 600, Number(args.warmup));
  await bench.stack.quiesce();
  await statsOf(bench.stack);
  const alone = await closedLoop(bench.clients, 1, 600, Number(args["warmup-idle"]));
  const first = alone.latencies.slice(0, 200).sort((a, b) => a - b);
  const afterLoad = { p50: percentile(first, 50), p99: percentile(first, 99) };
  console.log(
    `  warm-up                            calls=${String(loaded.calls).padStart(6)} failed=${loaded.failed + alone.failed} ` +
      `(${args.concurrency} in flight, ${fmt(loaded.seconds, 1)} s; then ${alone.calls} one at a time: ` +
      `right after the load, the first ${first.length} p50=${fmt(afterLoad.p50)}ms p99=${fmt(afterLoad.p99)}ms)`,
  );
  return afterLoad;
}

/** A phase's median and 99th percentile latency, ms. */
interface PhaseSummary {
  p50: number;
  p99: number;
}

function summarize(name: string, r: PhaseResult): PhaseSummary & { rate: number } {
  const sorted = [...r.latencies].sort((a, b) => a - b);
  const out = { rate: r.calls / r.seconds, p50: percentile(sorted, 50), p99: percentile(sorted, 99) };
  console.log(
    `  ${name.padEnd(34)} calls=${String(r.calls).padStart(6)} failed=${r.failed} calls/s=${out.rate.toFixed(0).padStart(5)} p50=${out.p50.toFixed(2)}ms p99=${out.p99.toFixed(2)}ms`,
  );
  return out;
}

/** Every service's stats at once, keyed by process label (orchestrator, policy, executor-1, audit). */
async function statsOf(stack: Stack): Promise<Record<string, ServiceStats>> {
  const live = stack.processes.filter((p) => !p.exited);
  const all = await Promise.all(live.map(async (p) => [p.name, await p.stats()] as const));
  return Object.fromEntries(all);
}

/** Counter deltas per service between two snapshots, divided by `calls`. */
function countersPerCall(before: Record<string, ServiceStats>, after: Record<string, ServiceStats>, calls: number): Record<string, Record<string, number>> {
  const out: Record<string, Record<string, number>> = {};
  for (const [service, stats] of Object.entries(after)) {
    const earlier = before[service]?.counters ?? {};
    const deltas: Record<string, number> = {};
    for (const [name, value] of Object.entries(stats.counters)) {
      const d = value - (earlier[name] ?? 0);
      if (d > 0) deltas[name] = d / calls;
    }
    out[service] = deltas;
  }
  return out;
}

interface RunFigures {
  sustained: number;
  throughput: number;
  idleP50: number;
  idleP99: number;
  /** The first idle calls right after the load warm-up (see {@link warmUp}). */
  afterLoad: PhaseSummary;
  rate: number;
  rateP50: number;
  rateP99: number;
  duplicates: number;
  /** CPU ms per call under load, per process group. */
  cpu: Record<string, number>;
  /** CPU ms per call of the idle phase (one call at a time), per process group. */
  idleCpu: Record<string, number>;
  /** CPU ms per call of the paced phase (half of capacity), per process group: batched less than under load. */
  pacedCpu: Record<string, number>;
  /** How busy the cores were in the paced phase (1: both of them all the time). */
  pacedBusy: number;
  /** Per service: database commands (`db.<command>.<role>.<collection>`) and publishes per call under load. */
  counters: Record<string, Record<string, number>>;
  /** The same, per call of the idle phase (nothing batches there). */
  idleCounters: Record<string, Record<string, number>>;
  /** The same, per call of the paced phase. */
  pacedCounters: Record<string, Record<string, number>>;
  path: PathSummary | undefined;
  /** Where a paced call's time went: every call's medians, and those of the slowest 1 % (its p99 tail). */
  pacedPath: { every: PathSummary; tail: PathSummary } | undefined;
  tables: TableStats[] | undefined;
  bare: BarePipelineResult | undefined;
}

/** The benchmark's own process: its HTTP clients share the cores with the stack. */
const CLIENT_CPU = "bench client";

/** CPU milliseconds this process spent since `before` (a `process.cpuUsage()` reading). */
function clientCpuMs(before: NodeJS.CpuUsage): number {
  const spent = process.cpuUsage(before);
  return (spent.user + spent.system) / 1_000;
}

/** Each figure divided by the number of calls. */
function perCall(ms: Record<string, number>, calls: number): Record<string, number> {
  return Object.fromEntries(Object.entries(ms).map(([k, v]) => [k, v / calls]));
}

/** `<stack>_tools` holds what the benchmark tools do (their effect ledger); the rest is the runtime's. */
function commandOwner(stack: string): (command: string) => "runtime" | "tool" {
  return (command) => (command.includes(`.${stack}_tools.`) ? "tool" : "runtime");
}

/**
 * `--env`: comma-separated `NAME=value` pairs for the services of this checkout (not those of `--compare`'s),
 * so that a setting is compared side by side: `--compare . --env AUDIT_LINGER_MS=0`.
 */
function extraEnv(list: string): Record<string, string> {
  const pairs = envPairs(list, "");
  if (pairs.ok) return pairs.env;
  console.error(`bench: --env: ${pairs.error}\n${USAGE}`);
  process.exit(2);
}

/** `--bare-messages`: `hops` or `toolgate`; anything else is a usage error (exit 2). */
function bareMessages(value: string): BareMessages {
  if (value === "hops" || value === "toolgate") return value;
  console.error(`bench: --bare-messages must be hops or toolgate, got ${JSON.stringify(value)}\n${USAGE}`);
  process.exit(2);
}

/** `--otlp-env`: comma-separated `OTEL_*=value` pairs; anything else is a usage error (exit 2). */
function otlpEnv(list: string): Record<string, string> {
  const pairs = envPairs(list, "OTEL_");
  if (pairs.ok) return pairs.env;
  console.error(`bench: --otlp-env: ${pairs.error}\n${USAGE}`);
  process.exit(2);
}

/** Answers every OTLP export with 200 and counts them: the services' exporter costs what it would with a collector. */
async function startOtlpSink(): Promise<{ url: string; requests: () => number; bytes: () => number; close: () => Promise<void> }> {
  let requests = 0;
  let bytes = 0;
  const server = createServer((request, response) => {
    request.on("data", (chunk: Buffer) => (bytes += chunk.length));
    request.on("end", () => {
      requests += 1;
      response.writeHead(200, { "content-type": request.headers["content-type"] ?? "application/x-protobuf" }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (typeof address !== "object" || !address) throw new Error("OTLP sink not listening");
  return {
    url: `http://127.0.0.1:${address.port}`,
    requests: () => requests,
    bytes: () => bytes,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

async function oneRun(index: number): Promise<RunFigures> {
  const tool = args.tool;
  const sleepMs = Number(args["sleep-ms"]);
  const concurrency = Number(args.concurrency);
  let bare: BarePipelineResult | undefined;
  if (args.baseline) {
    bare = await runBarePipeline({
      natsUrl: NATS_URL,
      messages: BARE_MESSAGES,
      concurrency,
      durationS: Number(args.duration),
      idleCalls: Number(args["idle-calls"]),
      idleWarmupCalls: Number(args["warmup-idle"]),
    });
    console.log(
      `run ${index + 1}: bare JetStream pipeline${BARE_LABEL}: ${bare.throughput.rate.toFixed(0)} calls/s at ${concurrency} in flight, idle p50 ${bare.idle.p50.toFixed(2)} ms p99 ${bare.idle.p99.toFixed(2)} ms`,
    );
  }
  const bench = await startBenchStack();
  const { stack, mongo, clients, cpuGroups } = bench;
  try {
    console.log(`run ${index + 1}: ${args.executors} executor(s), tool ${tool}${tool === "bench_sleep" ? ` (${sleepMs} ms)` : ""}`);
    const rightAfterLoad = await warmUp(bench);
    // Each phase starts once the services (audit above all) have caught up with the previous one's events.
    await stack.quiesce();
    const tablesBefore = await readTableStats(PG_URL, stack.name);
    const beforeIdle = await statsOf(stack); // also hands over (and drops) the warm-up's spans
    const idleCalls = Number(args["idle-calls"]);
    const idleCpuBefore = readCpu(cpuGroups);
    const idleClientBefore = process.cpuUsage();
    const idlePhase = await closedLoop(clients, 1, 60, idleCalls);
    const idle = summarize("idle (1 call at a time)", idlePhase);
    const idleClient = clientCpuMs(idleClientBefore);
    await stack.quiesce();
    const idleCpu = perCall({ ...cpuSpent(idleCpuBefore, readCpu(cpuGroups)), [CLIENT_CPU]: idleClient }, idlePhase.calls);
    const traced = await statsOf(stack);
    const path = summarizePaths(pathsOf(idlePhase.timed, traced), commandOwner(stack.name));
    const idleCounters = countersPerCall(beforeIdle, traced, idlePhase.calls);

    const cpuBefore = readCpu(cpuGroups);
    const clientBefore = process.cpuUsage();
    const loaded = await closedLoop(clients, concurrency, Number(args.duration));
    const loadClient = clientCpuMs(clientBefore);
    const saturated = summarize(`throughput (${concurrency} concurrent)`, loaded);
    // Calls answer before audit has stored their last events; sustained throughput counts until it has.
    const drainStarted = performance.now();
    await stack.quiesce();
    const drainSeconds = (performance.now() - drainStarted) / 1000;
    const cpuAfter = readCpu(cpuGroups);
    const afterLoad = await statsOf(stack);
    const sustained = loaded.calls / (loaded.seconds + drainSeconds);
    console.log(`  every consumer caught up ${drainSeconds.toFixed(1)} s later: sustained ${sustained.toFixed(0)} calls/s`);
    const cpu = perCall({ ...cpuSpent(cpuBefore, cpuAfter), [CLIENT_CPU]: loadClient }, loaded.calls);
    const counters = countersPerCall(traced, afterLoad, loaded.calls);

    const rate = args.rate === "auto" ? Math.max(1, Math.round(saturated.rate / 2)) : Number(args.rate);
    const pacedCpuBefore = readCpu(cpuGroups);
    const pacedClientBefore = process.cpuUsage();
    const pacedMachineBefore = readMachineCpu();
    const pacedPhase = await openLoop(clients, rate, Math.min(10, Number(args.duration)));
    const paced = summarize(`paced at ${rate} calls/s`, pacedPhase);
    await stack.quiesce();
    const pacedBusy = busyShare(pacedMachineBefore, readMachineCpu());
    const pacedCpu = perCall({ ...cpuSpent(pacedCpuBefore, readCpu(cpuGroups)), [CLIENT_CPU]: clientCpuMs(pacedClientBefore) }, pacedPhase.calls);
    // PostgreSQL publishes a backend's table counters at most once a second.
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    const tablesAfter = await readTableStats(PG_URL, stack.name);
    const tables = tablesBefore && tablesAfter ? tableDeltas(tablesBefore, tablesAfter) : undefined;
    const effects = await duplicateEffects(mongo.db(`${stack.name}_tools`));
    // bench_noop writes nothing: each executor counts its executions per key in memory.
    const final = await statsOf(stack);
    const pacedPaths = pathsOf(pacedPhase.timed, final);
    const pacedEvery = summarizePaths(pacedPaths, commandOwner(stack.name));
    const pacedTail = summarizePaths(slowest(pacedPaths, 0.01), commandOwner(stack.name));
    const executorCounters = Object.entries(final).filter(([name]) => name.startsWith("executor"));
    const count = (name: string) => executorCounters.reduce((sum, [, s]) => sum + (s.counters[name] ?? 0), 0);
    const executions = count(`tool.${tool}.executions`);
    const repeated = count(`tool.${tool}.repeated_executions`);
    console.log(
      tool === "bench_noop"
        ? `  executions counted=${executions} keys executed more than once=${repeated}`
        : `  effects recorded=${effects.total} keys with more than one effect=${effects.duplicates.length}`,
    );
    return {
      sustained,
      throughput: saturated.rate,
      idleP50: idle.p50,
      idleP99: idle.p99,
      afterLoad: rightAfterLoad,
      rate,
      rateP50: paced.p50,
      rateP99: paced.p99,
      duplicates: effects.duplicates.length + repeated,
      cpu,
      idleCpu,
      pacedCpu,
      pacedBusy,
      counters: renameDatabases(counters, stack.name),
      idleCounters: renameDatabases(idleCounters, stack.name),
      pacedCounters: renameDatabases(countersPerCall(afterLoad, final, pacedPhase.calls), stack.name),
      path: path && renamePath(path, stack.name),
      pacedPath: pacedEvery && pacedTail ? { every: renamePath(pacedEvery, stack.name), tail: renamePath(pacedTail, stack.name) } : undefined,
      tables: tables?.map((t) => ({ ...t, collection: t.collection.replace(`${stack.name}_`, "") })),
      bare,
    };
  } finally {
    await bench.close();
  }
}

/** A stack started for the benchmark, with the HTTP clients and process groups that drive and measure it. */
interface BenchStack {
  stack: Stack;
  mongo: MongoClient;
  clients: () => Client;
  cpuGroups: Record<string, CpuGroup>;
  /** Stops the stack and drops its databases. */
  close(): Promise<void>;
}

/**
 * Starts a stack for the benchmark; with `otlpEndpoint`, every service exports its spans there. `stacks` is the
 * `Stack` of the checkout whose services run (this one's by default); `--env` goes to this checkout's stack only,
 * which `base` says explicitly: with `--compare .` both stacks come from the same module.
 */
async function startBenchStack(otlpEndpoint?: string, stacks: typeof Stack = Stack, base = false): Promise<BenchStack> {
  const stack = await stacks.start({
    natsUrl: NATS_URL,
    mongoUrl: MONGO_URL,
    streamReplicas: STREAM_REPLICAS,
    toolsets: ["bench"],
    executors: Number(args.executors),
    logLevel: "warn",
    extraEnv: {
      STATS_TRACE_CAPACITY: String(TRACE_CAPACITY),
      ...(base ? {} : EXTRA_ENV),
      ...(otlpEndpoint ? { OTEL_EXPORTER_OTLP_ENDPOINT: otlpEndpoint, OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf", ...OTLP_ENV } : {}),
    },
  });
  const forget = stopOnInterrupt(stack);
  const mongo = await new MongoClient(MONGO_URL).connect();
  const pool = new Pool(stack.orchestratorUrl, { connections: 1_024 });
  return {
    stack,
    mongo,
    clients: () => new Client(pool, stack.apiKeys.alice, args.tool, Number(args["sleep-ms"]), args["idempotency-keys"]),
    cpuGroups: {
      ...Object.fromEntries(stack.processes.map((p) => [p.name, { pids: [p.pid] }])),
      ...SERVER_CPU_GROUPS,
    },
    async close() {
      forget();
      await pool.close();
      await stack.stop();
      await mongo.db(`${stack.name}_runtime`).dropDatabase();
      await mongo.db(`${stack.name}_tools`).dropDatabase();
      await mongo.close();
    },
  };
}

/** Counter names without the stack's random database prefix, so runs can be compared. */
function renameDatabases(counters: Record<string, Record<string, number>>, stack: string): Record<string, Record<string, number>> {
  return Object.fromEntries(
    Object.entries(counters).map(([service, c]) => [service, Object.fromEntries(Object.entries(c).map(([k, v]) => [k.replaceAll(`${stack}_`, ""), v]))]),
  );
}

/** The critical paths of `calls`, rebuilt from the services' traces in `stats` (calls a trace misses are left out). */
function pathsOf(calls: readonly ClientCall[], stats: Record<string, ServiceStats>): Step[][] {
  const executor = Object.entries(stats)
    .filter(([name]) => name.startsWith("executor"))
    .flatMap(([, s]) => s.trace);
  const traces = { orchestrator: stats.orchestrator?.trace ?? [], policy: stats.policy?.trace ?? [], executor };
  return calls.map((call) => criticalPath(call, traces)).filter((p): p is Step[] => p !== undefined);
}

function renamePath(path: PathSummary, stack: string): PathSummary {
  const bare = (name: string): string => name.replaceAll(`${stack}_`, "");
  return {
    ...path,
    steps: path.steps.map((s) => ({ ...s, commands: s.commands.map(bare), segments: s.segments.map((g) => ({ ...g, name: bare(g.name) })) })),
  };
}

/** The median of one number over the runs, for every key any run reported. */
function medianOf(records: Record<string, number>[]): Record<string, number> {
  const keys = [...new Set(records.flatMap((r) => Object.keys(r)))];
  return Object.fromEntries(keys.map((k) => [k, median(records.map((r) => r[k] ?? 0))]));
}

const fmt = (n: number, digits = 2): string => n.toFixed(digits);

function report(runs: RunFigures[]): void {
  const duplicates = runs.reduce((sum, r) => sum + r.duplicates, 0);
  const sustained = median(runs.map((r) => r.sustained));
  console.log(`\nmedian of ${runs.length} runs (${args.executors} executor(s), ${args.tool}):`);
  console.log(`  throughput           ${fmt(median(runs.map((r) => r.throughput)), 0)} calls/s answered`);
  console.log(`  sustained            ${fmt(sustained, 0)} calls/s (until every event is audited)`);
  console.log(`  idle latency         p50 ${fmt(median(runs.map((r) => r.idleP50)))} ms, p99 ${fmt(median(runs.map((r) => r.idleP99)))} ms`);
  console.log(
    `  … right after load   p50 ${fmt(median(runs.map((r) => r.afterLoad.p50)))} ms, p99 ${fmt(median(runs.map((r) => r.afterLoad.p99)))} ms` +
      ` (the first idle calls after the warm-up's load, before the stack settles)`,
  );
  console.log(
    `  paced (${runs.map((r) => r.rate).join("/")} calls/s) p50 ${fmt(median(runs.map((r) => r.rateP50)))} ms, p99 ${fmt(median(runs.map((r) => r.rateP99)))} ms`,
  );
  const bare = runs.map((r) => r.bare).filter((b): b is BarePipelineResult => b !== undefined);
  if (bare.length === runs.length && bare.length > 0) {
    const ratios = runs.map((r) => r.sustained / r.bare!.throughput.rate);
    console.log(
      `  ${`bare pipeline${BARE_LABEL}`.padEnd(20)} ${fmt(median(bare.map((b) => b.throughput.rate)), 0)} calls/s, idle p50 ${fmt(median(bare.map((b) => b.idle.p50)))} ms` +
        ` p99 ${fmt(median(bare.map((b) => b.idle.p99)))} ms; CPU ${fmt(median(bare.map((b) => sumOf(b.cpuMsPerCall))))} ms per call`,
    );
    console.log(
      `  ratio to bare        ${fmt(median(ratios))} × (sustained ÷ bare throughput, each run side by side: ${ratios.map((r) => fmt(r)).join(", ")})`,
    );
  }
  console.log(`  duplicate executions ${duplicates}`);

  const path = runs.map((r) => r.path).find((p) => p !== undefined);
  if (path) {
    console.log(`\nwhere an idle call's time goes (median over ${path.calls} calls of one run; µs):`);
    for (const step of path.steps) {
      const db =
        step.commands.length === 0
          ? ""
          : `  of which ${fmt(step.databaseUs, 0)} in ${step.sequential} sequential db round trip(s)${step.ledger > 0 ? ` and ${step.ledger} ledger claim(s)` : ""}: ${step.commands.join(", ")}`;
      console.log(`  ${step.name.padEnd(36)} ${fmt(step.medianUs, 0).padStart(7)}${db}`);
      if (step.commands.length > 0) {
        const parts = step.segments.map((s) => `${fmt(s.medianUs, 0)} ${s.name === "work" ? "work" : s.name.replace(/^db\./, "")}`);
        console.log(`  ${"".padEnd(36)}         = ${parts.join(" + ")}  (medians)`);
      }
    }
    const seq = median(runs.map((r) => r.path?.sequential.runtime.median ?? Number.NaN));
    const seqMax = Math.max(...runs.map((r) => r.path?.sequential.runtime.max ?? Number.NaN));
    const tool = median(runs.map((r) => r.path?.sequential.tool.median ?? Number.NaN));
    console.log(`  sequential database round trips on the critical path: ${seq} (worst ${seqMax}); the tool's own: ${tool}`);
  }
  const pacedRun = runs.find((r) => r.pacedPath !== undefined);
  if (pacedRun?.pacedPath) {
    // Under a steady load the same steps wait for CPU (seven processes on the cores) and for the batch ahead of
    // theirs (one insert command in flight per collection): what the paced p50 and p99 are made of.
    const { every, tail } = pacedRun.pacedPath;
    console.log(`\nwhere a call's time goes under a steady load (paced at ${pacedRun.rate} calls/s, one run; µs, medians per step, of which in the database):`);
    console.log(`  ${"".padEnd(36)} ${`every call (${every.calls})`.padStart(22)} ${`slowest 1 % (${tail.calls})`.padStart(22)}`);
    every.steps.forEach((step, i) => {
      const cell = (s: PathSummary["steps"][number] | undefined) =>
        s === undefined ? "" : `${fmt(s.medianUs, 0)}${s.sequential > 0 ? ` (${fmt(s.databaseUs, 0)})` : ""}`;
      console.log(`  ${step.name.padEnd(36)} ${cell(step).padStart(22)} ${cell(tail.steps[i]).padStart(22)}`);
    });
  }

  const cpu = medianOf(runs.map((r) => r.cpu));
  const idleCpu = medianOf(runs.map((r) => r.idleCpu));
  const pacedCpu = medianOf(runs.map((r) => r.pacedCpu));
  const servers = Object.keys(SERVER_CPU_GROUPS);
  const services = Object.keys(cpu).filter((k) => !servers.includes(k) && k !== CLIENT_CPU);
  const row = (name: string, load: number, half: number, idle: number, note = "") =>
    console.log(`  ${name.padEnd(16)} ${fmt(load).padStart(10)} ${fmt(half).padStart(9)} ${fmt(idle).padStart(9)}${note}`);
  // At rest a call wakes every process on its way one after the other, on caches others have filled since: the
  // idle column is several times the loaded one, and it is what an idle call's latency is made of. At half of
  // capacity calls batch less than under load, so a call costs more there too.
  console.log(`\nCPU per call (ms, median of runs):   under load     paced      idle`);
  for (const k of [...services, ...servers]) row(k, cpu[k] ?? 0, pacedCpu[k] ?? 0, idleCpu[k] ?? 0);
  const total = stackCpu(cpu);
  const sumWithout = (record: Record<string, number>, keys: string[]) => keys.reduce((s, k) => s + (record[k] ?? 0), 0);
  row(
    "whole stack",
    total,
    stackCpu(pacedCpu),
    stackCpu(idleCpu),
    `  (under load: services ${fmt(sumWithout(cpu, services))}, servers ${fmt(sumWithout(cpu, servers))})`,
  );
  row(CLIENT_CPU, cpu[CLIENT_CPU] ?? 0, pacedCpu[CLIENT_CPU] ?? 0, idleCpu[CLIENT_CPU] ?? 0, "  (this benchmark's own HTTP clients, on the same cores)");
  console.log(
    `  ${"cores busy".padEnd(16)} ${"".padStart(10)} ${`${fmt(median(runs.map((r) => r.pacedBusy * 100)), 0)} %`.padStart(9)}  (the machine's, over the paced phase)`,
  );
  const bareCpu = runs.map((r) => (r.bare ? sumOf(r.bare.cpuMsPerCall) : Number.NaN)).filter((v) => Number.isFinite(v));
  if (bareCpu.length > 0) console.log(`  ${"× bare".padEnd(14)} ${fmt(total / median(bareCpu))}  (bare pipeline ${fmt(median(bareCpu))} ms per call)`);

  const perService = new Map<string, Record<string, number>>();
  for (const service of new Set(runs.flatMap((r) => Object.keys(r.counters)))) perService.set(service, medianOf(runs.map((r) => r.counters[service] ?? {})));
  let commands = 0;
  let publishes = 0;
  console.log(`\nper call under load (median of runs): database commands and JetStream publishes by service`);
  for (const [service, counters] of perService) {
    const db = Object.entries(counters).filter(([k]) => k.startsWith("db."));
    const pub = Object.entries(counters).filter(([k]) => k.startsWith("bus.publish."));
    const dbSum = db.reduce((s, [, v]) => s + v, 0);
    const pubSum = pub.reduce((s, [, v]) => s + v, 0);
    commands += dbSum;
    publishes += pubSum;
    console.log(`  ${service.padEnd(14)} db ${fmt(dbSum)}  publishes ${fmt(pubSum)}`);
    for (const [k, v] of db.sort((a, b) => b[1] - a[1])) console.log(`      ${fmt(v, 3).padStart(6)}  ${k.slice(3)}`);
    for (const [k, v] of pub.sort((a, b) => b[1] - a[1])) console.log(`      ${fmt(v, 3).padStart(6)}  publish ${k.slice("bus.publish.".length)}`);
  }
  console.log(`  all services   db ${fmt(commands)} commands, ${fmt(publishes)} publishes per call`);
  const idleCommands = median(runs.map((r) => dbCommands(r.idleCounters)));
  console.log(`  idle (one call at a time, nothing to batch with): db ${fmt(idleCommands)} commands per call`);
  const pacedCommands = median(runs.map((r) => dbCommands(r.pacedCounters)));
  const pacedRates = runs.map((r) => r.rate).join("/");
  console.log(`  paced (${pacedRates} calls/s): db ${fmt(pacedCommands)} commands per call`);

  const tables = runs.map((r) => r.tables).find((t) => t !== undefined);
  if (tables) {
    const calls = tables.find((t) => t.collection.endsWith("idempotency_keys"))?.inserted ?? 1;
    console.log(`\nPostgreSQL during one run (idle, load and paced phases; ${calls} keys claimed): per table`);
    for (const t of tables.sort((a, b) => b.seqRowsRead - a.seqRowsRead || b.inserted - a.inserted)) {
      console.log(
        `  ${t.collection.padEnd(36)} rows ${String(t.rows).padStart(7)}  inserted ${String(t.inserted).padStart(7)}  updated ${String(t.updated).padStart(5)}` +
          `  index scans ${String(t.indexScans).padStart(6)}  seq scans ${String(t.seqScans).padStart(4)} reading ${t.seqRowsRead} rows`,
      );
    }
  } else console.log(`\nPostgreSQL table counters: not available (psql could not reach ${PG_URL.replace(/\/\/[^@]*@/, "//")})`);

  if (path) {
    // A MongoDB round trip is cheaper than FerretDB's (which relays each command to PostgreSQL in a transaction
    // of its own); only the sequential ones on the critical path move the idle latency.
    const rtt = Number(args["mongo-rtt-ms"]);
    const idleP50 = median(runs.map((r) => r.idleP50));
    const ferretMs = path.steps.reduce((sum, s) => sum + s.databaseUs, 0) / 1000;
    const sequential = path.sequential.runtime.median + path.sequential.tool.median;
    const docs = tables
      ? tables.reduce((sum, t) => sum + t.inserted, 0) / Math.max(1, tables.find((t) => t.collection.endsWith("idempotency_keys"))?.inserted ?? 1)
      : undefined;
    console.log(`\nprojection to MongoDB (the inputs, then what they give with a ${rtt} ms journaled round trip, --mongo-rtt-ms):`);
    console.log(
      `  idle: the critical path spends ${fmt(ferretMs)} ms in ${sequential} sequential FerretDB round trips;` +
        ` on MongoDB idle p50 ≈ ${fmt(idleP50)} − ${fmt(ferretMs)} + ${sequential} × ${rtt} = ${fmt(idleP50 - ferretMs + sequential * rtt)} ms`,
    );
    console.log(
      `  load: ${fmt(commands)} commands per call (inserts, batched; no reads on the path)` +
        (docs === undefined ? "" : `, ${fmt(docs)} documents per call`) +
        `; the services and NATS spent ${fmt(total - (cpu.ferretdb ?? 0) - (cpu.postgres ?? 0))} ms of CPU per call, FerretDB and PostgreSQL ${fmt((cpu.ferretdb ?? 0) + (cpu.postgres ?? 0))} ms`,
    );
  }
  if (duplicates > 0) process.exit(1);
}

/** CPU per call of the stack's processes: every group but the benchmark's own client. */
/** CPU ms per call of NATS, FerretDB and PostgreSQL. */
function serverCpu(cpu: Record<string, number>): number {
  return Object.keys(SERVER_CPU_GROUPS).reduce((sum, name) => sum + (cpu[name] ?? 0), 0);
}

function stackCpu(cpu: Record<string, number>): number {
  return sumOf(cpu) - (cpu[CLIENT_CPU] ?? 0);
}

/** Database commands per call, all services together. */
function dbCommands(counters: Record<string, Record<string, number>>): number {
  return Object.values(counters)
    .flatMap((c) => Object.entries(c))
    .filter(([k]) => k.startsWith("db."))
    .reduce((sum, [, v]) => sum + v, 0);
}

function sumOf(record: Record<string, number>): number {
  return Object.values(record).reduce((s, v) => s + v, 0);
}

/** One half of a comparison's pair: a stack's load for `--duration` seconds and its drain. */
interface Half {
  calls: number;
  failed: number;
  /** Sustained throughput: calls over the load and the time audit took to catch up after it. */
  sustained: number;
  /** Median latency of the half's calls, ms. */
  p50: number;
  /** 99th percentile of the half's latencies, ms. */
  p99: number;
  /** CPU ms per call, per process group (the servers' counted in both halves). */
  cpu: Record<string, number>;
}

async function loadHalf(bench: BenchStack): Promise<Half> {
  const before = readCpu(bench.cpuGroups);
  // `--rate <calls/s>`: an open loop at that rate (latency under a steady load) instead of a closed one.
  const loaded =
    args.rate === "auto"
      ? await closedLoop(bench.clients, Number(args.concurrency), Number(args.duration))
      : await openLoop(bench.clients, Number(args.rate), Number(args.duration));
  const drainStarted = performance.now();
  await bench.stack.quiesce();
  const seconds = loaded.seconds + (performance.now() - drainStarted) / 1000;
  return {
    calls: loaded.calls,
    failed: loaded.failed,
    sustained: loaded.calls / seconds,
    p50: median(loaded.latencies),
    p99: percentile(
      [...loaded.latencies].sort((a, b) => a - b),
      99,
    ),
    cpu: perCall(cpuSpent(before, readCpu(bench.cpuGroups)), loaded.calls),
  };
}

/** The two sides of a comparison: `base` and `variant`, with what tells them apart. */
interface Comparison {
  base: BenchStack;
  variant: BenchStack;
  /** What the variant is, for the report: "with an OTLP exporter", say. */
  what: string;
}

/**
 * Two stacks run side by side and take turns under load, every other pair the variant first. Each stays up
 * between its turns (warm, nothing restarted), and a pair's two halves are seconds apart, so a machine whose speed
 * swings within minutes moves both alike. Prints each pair's ratios and their medians; returns the pairs.
 */
async function comparePairs({ base, variant, what }: Comparison): Promise<{ base: Half; variant: Half }[]> {
  for (const bench of [base, variant]) {
    await warmUp(bench);
    await bench.stack.quiesce();
  }
  const load = args.rate === "auto" ? `at ${args.concurrency} in flight` : `paced at ${args.rate} calls/s`;
  console.log(`${args.runs} pairs of ${args.duration} s ${load}, base and ${what} (${args.tool}):`);
  const pairs: { base: Half; variant: Half }[] = [];
  for (let i = 0; i < Number(args.runs); i++) {
    const variantFirst = i % 2 === 1;
    const first = await loadHalf(variantFirst ? variant : base);
    const second = await loadHalf(variantFirst ? base : variant);
    const pair = variantFirst ? { base: second, variant: first } : { base: first, variant: second };
    pairs.push(pair);
    console.log(
      `  pair ${i + 1}${variantFirst ? " (variant first)" : ""}: ${fmt(pair.base.sustained, 0)} → ${fmt(pair.variant.sustained, 0)} calls/s = ` +
        `${fmt(pair.variant.sustained / pair.base.sustained)} ×, p50 ${fmt(pair.base.p50)} → ${fmt(pair.variant.p50)} ms, ` +
        `p99 ${fmt(pair.base.p99)} → ${fmt(pair.variant.p99)} ms; ` +
        `stack's CPU per call ${fmt(stackCpu(pair.variant.cpu) / stackCpu(pair.base.cpu))} ×, servers' ${fmt(serverCpu(pair.variant.cpu) / serverCpu(pair.base.cpu))} ×`,
    );
  }
  const ratio = (of: (h: Half) => number) => fmt(median(pairs.map((p) => of(p.variant) / of(p.base))));
  const failed = pairs.reduce((sum, p) => sum + p.base.failed + p.variant.failed, 0);
  let repeated = 0;
  for (const bench of [base, variant]) {
    for (const [name, stats] of Object.entries(await statsOf(bench.stack))) {
      if (name.startsWith("executor")) repeated += stats.counters[`tool.${args.tool}.repeated_executions`] ?? 0;
    }
  }
  const cpuOf = (half: "base" | "variant", name: string) => fmt(median(pairs.map((p) => p[half].cpu[name] ?? 0)));
  console.log(
    `\n${what}, medians of ${pairs.length} pairs' ratios to base: throughput ${ratio((h) => h.sustained)} ×, p50 ${ratio((h) => h.p50)} ×, p99 ${ratio((h) => h.p99)} ×, ` +
      `stack's CPU per call ${ratio((h) => stackCpu(h.cpu))} ×`,
  );
  console.log(
    `  CPU ms per call base → variant (medians): stack ${fmt(median(pairs.map((p) => stackCpu(p.base.cpu))))} → ${fmt(median(pairs.map((p) => stackCpu(p.variant.cpu))))}; ` +
      Object.keys(pairs[0]!.base.cpu)
        .map((name) => `${name} ${cpuOf("base", name)} → ${cpuOf("variant", name)}`)
        .join(", "),
  );
  console.log(`  failed calls ${failed}, duplicate executions ${repeated}`);
  if (args.json) writeFileSync(args.json, JSON.stringify({ args, pairs }, null, 2));
  return pairs;
}

/** `--otlp-compare`: the variant exports every span to a loopback sink. */
async function compareExporter(): Promise<void> {
  const sink = await startOtlpSink();
  const plain = await startBenchStack();
  let exporting: BenchStack | undefined;
  try {
    exporting = await startBenchStack(sink.url);
    await comparePairs({ base: plain, variant: exporting, what: "with an OTLP exporter" });
    console.log(`  ${sink.requests()} exports, ${fmt(sink.bytes() / 1e6, 1)} MB`);
  } finally {
    await exporting?.close();
    await plain.close();
    await sink.close();
  }
}

/** `--compare <checkout>`: the base is a stack of the other checkout, the variant this checkout's. */
async function compareCheckouts(checkout: string): Promise<void> {
  const entry = join(resolve(checkout), "packages/testkit/dist/stack.js");
  if (!existsSync(entry)) {
    console.error(`bench: --compare: ${entry} does not exist; build that checkout first (pnpm install && pnpm build)\n${USAGE}`);
    process.exit(2);
  }
  const other = ((await import(pathToFileURL(entry).href)) as { Stack: typeof Stack }).Stack;
  const base = await startBenchStack(undefined, other, true);
  let variant: BenchStack | undefined;
  try {
    variant = await startBenchStack();
    await comparePairs({ base, variant, what: `this checkout against ${checkout}` });
  } finally {
    await variant?.close();
    await base.close();
  }
}

async function main(): Promise<void> {
  if (args["otlp-compare"]) return compareExporter();
  if (args.compare !== undefined) return compareCheckouts(args.compare);
  const runs: RunFigures[] = [];
  for (let i = 0; i < Number(args.runs); i++) runs.push(await oneRun(i));
  if (args.json) writeFileSync(args.json, JSON.stringify({ args, runs }, null, 2));
  report(runs);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
