/**
 * End-to-end benchmark: drives tool calls through the four real services (orchestrator API → policy →
 * executor → audit) with the no-op benchmark tool and prints calls/s, latency p50/p99 and the number of
 * duplicate executions counted by the tool's own effect ledger. Median of several runs.
 *
 * The paced phase starts calls at a fixed rate whatever their latency. By default (`--rate auto`) that rate is
 * half the throughput just measured, so it shows latency under a steady load the stack can carry; a rate
 * above capacity only measures the length of a growing queue.
 *
 *   node packages/devtools/dist/bench.js [--runs 3] [--duration 15] [--concurrency 64] [--rate auto|<calls/s>]
 *                                         [--executors 1] [--tool bench_noop|bench_sleep] [--sleep-ms 20]
 */
import { parseArgs } from "node:util";
import { Stack } from "@toolgate/testkit/stack";
import { duplicateEffects } from "@toolgate/toolsets";
import { MongoClient } from "mongodb";

const { values: args } = parseArgs({
  options: {
    runs: { type: "string", default: "3" },
    duration: { type: "string", default: "15" },
    concurrency: { type: "string", default: "64" },
    rate: { type: "string", default: "auto" },
    executors: { type: "string", default: "1" },
    tool: { type: "string", default: "bench_noop" },
    "sleep-ms": { type: "string", default: "20" },
    "idle-calls": { type: "string", default: "300" },
  },
});

const NATS_URL = process.env.TOOLGATE_TEST_NATS_URL ?? process.env.NATS_URL ?? "nats://127.0.0.1:4222";
const MONGO_URL = process.env.TOOLGATE_TEST_MONGO_URL ?? process.env.MONGO_URL ?? "mongodb://127.0.0.1:27117";

interface CallResponse {
  run_id: string;
  results: { status: string; result?: { ok: boolean } }[];
}

interface PhaseResult {
  calls: number;
  failed: number;
  seconds: number;
  latencies: number[];
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

class Client {
  #runId: string | undefined;
  #n = 0;
  constructor(
    private readonly stack: Stack,
    private readonly tool: string,
    private readonly sleepMs: number,
  ) {}

  /** One tool call, submitted and awaited through the public API; returns its latency in ms. */
  async call(): Promise<{ ms: number; ok: boolean }> {
    const n = this.#n++;
    const argumentsObject = this.tool === "bench_sleep" ? { ms: this.sleepMs, n } : { n };
    const started = performance.now();
    let response: { status: number; body: CallResponse };
    try {
      response = await this.stack.api<CallResponse>("POST", "/v1/tool-calls", {
        ...(this.#runId ? { run_id: this.#runId } : {}),
        calls: [{ id: `c${n}`, name: this.tool, arguments: argumentsObject }],
        wait_ms: 30_000,
      });
    } catch {
      // A refused or reset connection is a failed call, counted like any other.
      return { ms: performance.now() - started, ok: false };
    }
    const ms = performance.now() - started;
    this.#runId ??= response.body.run_id;
    const result = response.body.results?.[0];
    return { ms, ok: response.status === 200 && result?.status === "done" && result.result?.ok === true };
  }
}

/** Closed loop: `concurrency` clients call back to back for `seconds`. */
async function closedLoop(stack: Stack, tool: string, sleepMs: number, concurrency: number, seconds: number): Promise<PhaseResult> {
  const latencies: number[] = [];
  let failed = 0;
  const end = performance.now() + seconds * 1000;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      const client = new Client(stack, tool, sleepMs);
      while (performance.now() < end) {
        const r = await client.call();
        latencies.push(r.ms);
        if (!r.ok) failed++;
      }
    }),
  );
  return { calls: latencies.length, failed, seconds: (performance.now() - started) / 1000, latencies };
}

/** Open loop: calls started at a fixed rate regardless of how fast they finish. */
async function openLoop(stack: Stack, tool: string, sleepMs: number, rate: number, seconds: number): Promise<PhaseResult> {
  const latencies: number[] = [];
  let failed = 0;
  const clients = Array.from({ length: 256 }, () => new Client(stack, tool, sleepMs));
  const busy = new Set<Client>();
  const pending: Promise<void>[] = [];
  const started = performance.now();
  const total = Math.round(rate * seconds);
  for (let i = 0; i < total; i++) {
    const due = started + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((resolve) => setTimeout(resolve, wait));
    const client = clients.find((c) => !busy.has(c)) ?? new Client(stack, tool, sleepMs);
    busy.add(client);
    pending.push(
      client.call().then((r) => {
        busy.delete(client);
        latencies.push(r.ms);
        if (!r.ok) failed++;
      }),
    );
  }
  await Promise.all(pending);
  return { calls: latencies.length, failed, seconds: (performance.now() - started) / 1000, latencies };
}

function summarize(name: string, r: PhaseResult): { rate: number; p50: number; p99: number } {
  const sorted = [...r.latencies].sort((a, b) => a - b);
  const out = { rate: r.calls / r.seconds, p50: percentile(sorted, 50), p99: percentile(sorted, 99) };
  console.log(
    `  ${name.padEnd(34)} calls=${String(r.calls).padStart(6)} failed=${r.failed} calls/s=${out.rate.toFixed(0).padStart(5)} p50=${out.p50.toFixed(2)}ms p99=${out.p99.toFixed(2)}ms`,
  );
  return out;
}

interface RunFigures {
  sustained: number;
  throughput: number;
  idleP50: number;
  idleP99: number;
  rate: number;
  rateP50: number;
  rateP99: number;
  duplicates: number;
}

async function oneRun(index: number): Promise<RunFigures> {
  const tool = args.tool;
  const sleepMs = Number(args["sleep-ms"]);
  const stack = await Stack.start({
    natsUrl: NATS_URL,
    mongoUrl: MONGO_URL,
    toolsets: ["bench"],
    executors: Number(args.executors),
    logLevel: "warn",
  });
  const mongo = await new MongoClient(MONGO_URL).connect();
  try {
    console.log(`run ${index + 1}: ${args.executors} executor(s), tool ${tool}${tool === "bench_sleep" ? ` (${sleepMs} ms)` : ""}`);
    await closedLoop(stack, tool, sleepMs, 16, 2); // warm-up: JIT, connection pools, consumers
    // Each phase starts once the services (audit above all) have caught up with the previous one's events.
    await stack.quiesce();
    const idle = summarize("idle (1 call at a time)", await closedLoop(stack, tool, sleepMs, 1, Math.max(3, Number(args["idle-calls"]) / 200)));
    const loaded = await closedLoop(stack, tool, sleepMs, Number(args.concurrency), Number(args.duration));
    const saturated = summarize(`throughput (${args.concurrency} concurrent)`, loaded);
    // Calls answer before audit has stored their last events; sustained throughput counts until it has.
    const drainStarted = performance.now();
    await stack.quiesce();
    const drainSeconds = (performance.now() - drainStarted) / 1000;
    const sustained = loaded.calls / (loaded.seconds + drainSeconds);
    console.log(`  every consumer caught up ${drainSeconds.toFixed(1)} s later: sustained ${sustained.toFixed(0)} calls/s`);
    const rate = args.rate === "auto" ? Math.max(1, Math.round(saturated.rate / 2)) : Number(args.rate);
    const paced = summarize(`paced at ${rate} calls/s`, await openLoop(stack, tool, sleepMs, rate, Math.min(10, Number(args.duration))));
    const effects = await duplicateEffects(mongo.db(`${stack.name}_tools`));
    console.log(`  effects recorded=${effects.total} keys with more than one effect=${effects.duplicates.length}`);
    return {
      sustained,
      throughput: saturated.rate,
      idleP50: idle.p50,
      idleP99: idle.p99,
      rate,
      rateP50: paced.p50,
      rateP99: paced.p99,
      duplicates: effects.duplicates.length,
    };
  } finally {
    await stack.stop();
    await mongo.db(`${stack.name}_runtime`).dropDatabase();
    await mongo.db(`${stack.name}_tools`).dropDatabase();
    await mongo.close();
  }
}

async function main(): Promise<void> {
  const runs = [];
  for (let i = 0; i < Number(args.runs); i++) runs.push(await oneRun(i));
  const duplicates = runs.reduce((sum, r) => sum + r.duplicates, 0);
  console.log(`\nmedian of ${runs.length} runs (${args.executors} executor(s), ${args.tool}):`);
  console.log(`  throughput           ${median(runs.map((r) => r.throughput)).toFixed(0)} calls/s answered`);
  console.log(`  sustained            ${median(runs.map((r) => r.sustained)).toFixed(0)} calls/s (until every event is audited)`);
  console.log(`  idle latency         p50 ${median(runs.map((r) => r.idleP50)).toFixed(2)} ms, p99 ${median(runs.map((r) => r.idleP99)).toFixed(2)} ms`);
  console.log(
    `  paced (${runs.map((r) => r.rate).join("/")} calls/s) p50 ${median(runs.map((r) => r.rateP50)).toFixed(2)} ms, p99 ${median(runs.map((r) => r.rateP99)).toFixed(2)} ms`,
  );
  console.log(`  duplicate executions ${duplicates}`);
  if (duplicates > 0) process.exit(1);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
