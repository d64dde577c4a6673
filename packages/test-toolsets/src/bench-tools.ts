import { defineTool, type ToolContractInput, type ToolDefinition } from "@toolgate/registry";
import type { EffectLedger } from "./effect-ledger.js";

const noopContract: ToolContractInput = {
  name: "bench_noop",
  version: "1.0.0",
  description: "Benchmark tool: echoes its input and does nothing else. Use only to measure Toolgate's own overhead; never for real work.",
  owner: "toolgate",
  input_schema: {
    type: "object",
    properties: { n: { type: "integer", minimum: 0, maximum: 1_000_000_000 } },
    required: ["n"],
    additionalProperties: false,
  },
  output_schema: {
    type: "object",
    properties: { n: { type: "integer" } },
    required: ["n"],
    additionalProperties: false,
  },
  side_effect: "none",
  risk: "low",
  timeout_ms: 5_000,
  idempotency: { kind: "natural" },
};

const sleepContract: ToolContractInput = {
  name: "bench_sleep",
  version: "1.0.0",
  description: "Benchmark tool: waits the given milliseconds, like an I/O-bound call, and records one effect. Use only in benchmarks; never for real work.",
  owner: "toolgate",
  input_schema: {
    type: "object",
    properties: { ms: { type: "integer", minimum: 0, maximum: 10_000 }, n: { type: "integer", minimum: 0, maximum: 1_000_000_000 } },
    required: ["ms", "n"],
    additionalProperties: false,
  },
  output_schema: {
    type: "object",
    properties: { slept_ms: { type: "integer" } },
    required: ["slept_ms"],
    additionalProperties: false,
  },
  side_effect: "write",
  risk: "low",
  timeout_ms: 15_000,
  idempotency: { kind: "keyed" },
};

/** Contracts of the benchmark tools. */
export const benchContracts: ToolContractInput[] = [noopContract, sleepContract];

/** Where a tool without side effects reports each execution: `repeated` when its key had run before. */
export type ExecutionReport = (tool: string, repeated: boolean) => void;

/**
 * Executions per idempotency key, in memory: how a tool that must not write anything (a no-op) still lets a
 * benchmark prove that no key ran twice. Bounded: past `capacity` keys the oldest are forgotten.
 */
export class ExecutionCounter {
  readonly #seen = new Set<string>();
  constructor(
    private readonly report: ExecutionReport,
    private readonly capacity = 1_000_000,
  ) {}

  record(tool: string, key: string): void {
    const repeated = this.#seen.has(key);
    if (!repeated) {
      if (this.#seen.size >= this.capacity) this.#seen.delete(this.#seen.values().next().value!);
      this.#seen.add(key);
    }
    this.report(tool, repeated);
  }
}

/**
 * The benchmark tools. `bench_noop` does nothing, so it writes nothing: its executions are counted in memory.
 * `bench_sleep` stands for a real side effect: with a ledger, every execution records one effect.
 */
export function benchTools(ledger: EffectLedger | undefined, executions?: ExecutionCounter): ToolDefinition[] {
  return [
    defineTool(noopContract, (args, ctx) => {
      executions?.record("bench_noop", ctx.idempotencyKey);
      return Promise.resolve({ ok: true, data: { n: args.n ?? 0 } });
    }),
    defineTool(sleepContract, async (args, ctx) => {
      const ms = typeof args.ms === "number" ? args.ms : 0;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, ms);
        ctx.signal.addEventListener(
          "abort",
          () => {
            clearTimeout(timer);
            resolve();
          },
          { once: true },
        );
      });
      if (ctx.signal.aborted) return { ok: false, code: "TIMEOUT", message: "aborted before the sleep finished" };
      await ledger?.record("bench_sleep", ctx.idempotencyKey, ctx.callId);
      return { ok: true, data: { slept_ms: ms } };
    }),
  ];
}
