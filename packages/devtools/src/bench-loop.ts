/**
 * The tool loop's added latency per turn: managed runs of the scripted model `noop-turns` (ten turns of one
 * no-op tool call each, then a final answer) through the four real services, one run at a time. The model
 * answers instantly and the tool does nothing, so a turn's duration is Toolgate's own cost: the proposal,
 * policy, the executor, the result's way back and the next model request. Median of several runs.
 *
 * Options: `--help` (USAGE below).
 */
import { Stack } from "@toolgate/testkit/stack";
import { MongoClient } from "mongodb";
import { commandLineOrExit } from "./command-line.js";
import { stopOnInterrupt } from "./interrupts.js";

const USAGE = `usage: node packages/devtools/dist/bench-loop.js [--runs 5] [--warmup 80]
The tool loop's added latency per model turn (see the README, "Performance"), measured after --warmup runs.`;

/**
 * Runs before the measured ones: V8 optimizes a function only after many calls, in threads that share the cores, so
 * a stack measured after 2 runs (22 turns, this benchmark's warm-up until 2026-12-05) was still being compiled and
 * added 12–33 % per turn; after 80 or 300 the figures were alike (README, "Performance").
 */
const WARMUP_RUNS = "80";

const args = commandLineOrExit("bench-loop", USAGE, { runs: { type: "string", default: "5" }, warmup: { type: "string", default: WARMUP_RUNS } });
const NATS_URL = process.env.TOOLGATE_TEST_NATS_URL ?? process.env.NATS_URL ?? "nats://127.0.0.1:4222";
const MONGO_URL = process.env.TOOLGATE_TEST_MONGO_URL ?? process.env.MONGO_URL ?? "mongodb://127.0.0.1:27117";
/** Replicas of the stack's streams: 3 on the cluster of `./infra/dev.sh up --cluster`, which exports it. */
const STREAM_REPLICAS = Number(process.env.STREAM_REPLICAS ?? "1");
const TURNS = 11;

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

async function main(): Promise<void> {
  const stack = await Stack.start({
    natsUrl: NATS_URL,
    mongoUrl: MONGO_URL,
    streamReplicas: STREAM_REPLICAS,
    toolsets: ["research", "bench"],
    logLevel: "warn",
  });
  const forget = stopOnInterrupt(stack);
  const mongo = await new MongoClient(MONGO_URL).connect();
  const perTurn: number[] = [];
  try {
    const total = Number(args.warmup) + Number(args.runs);
    for (let i = 0; i < total; i++) {
      const started = performance.now();
      const run = await stack.runToEnd("scripted:noop-turns", "benchmark", {});
      const ms = performance.now() - started;
      if (run.status !== "completed" || run.calls.length !== TURNS - 1) throw new Error(`run ended ${run.status} with ${run.calls.length} calls`);
      if (i < Number(args.warmup)) continue;
      perTurn.push(ms / TURNS);
      console.log(`run ${i - Number(args.warmup) + 1}: ${ms.toFixed(0)} ms for ${TURNS} turns = ${(ms / TURNS).toFixed(1)} ms per turn`);
    }
  } finally {
    forget();
    await stack.stop();
    await mongo.db(`${stack.name}_runtime`).dropDatabase();
    await mongo.db(`${stack.name}_tools`).dropDatabase();
    await mongo.close();
  }
  console.log(
    `\nmedian added latency per turn: ${median(perTurn).toFixed(1)} ms (min ${Math.min(...perTurn).toFixed(1)}, max ${Math.max(...perTurn).toFixed(1)}, ${perTurn.length} runs)`,
  );
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
