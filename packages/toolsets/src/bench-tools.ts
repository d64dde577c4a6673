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

/** The benchmark tools; with a ledger, every execution records one effect. */
export function benchTools(ledger: EffectLedger | undefined): ToolDefinition[] {
  return [
    defineTool(noopContract, async (args, ctx) => {
      await ledger?.record("bench_noop", ctx.idempotencyKey, ctx.callId);
      return { ok: true, data: { n: args.n ?? 0 } };
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
