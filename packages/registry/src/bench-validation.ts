import type { CompiledTool, ToolRegistry } from "./registry.js";

/** One input of the validation benchmark and the outcome it is expected to have. */
export interface ValidationCase {
  label: string;
  argumentsJson: string;
}

/** Validations per second of one case: every run, their median, and the outcome each validation had. */
export interface ValidationMeasurement {
  label: string;
  outcome: string;
  bytes: number;
  perSecond: number[];
  median: number;
}

export interface ValidationBenchmarkOptions {
  /** Timed runs per case (the median is reported). Default 7. */
  runs?: number;
  /** Length of each run. Default 400 ms. */
  runMs?: number;
  now?: () => bigint;
}

/**
 * Measures `registry.checkArguments` on each case: a warm-up, then `runs` timed runs of `runMs` each, taken in
 * rotation over the cases so that background noise spreads evenly. Pure CPU; no I/O.
 */
export function benchmarkValidation(
  registry: ToolRegistry,
  tool: CompiledTool,
  cases: readonly ValidationCase[],
  options: ValidationBenchmarkOptions = {},
): ValidationMeasurement[] {
  const runs = options.runs ?? 7;
  const runNs = BigInt(Math.round((options.runMs ?? 400) * 1e6));
  const now = options.now ?? (() => process.hrtime.bigint());
  const results = cases.map((c) => {
    const check = registry.checkArguments(tool, c.argumentsJson);
    return { label: c.label, outcome: check.ok ? "ok" : check.code, bytes: Buffer.byteLength(c.argumentsJson), perSecond: [] as number[], median: 0 };
  });
  for (const c of cases) for (let i = 0; i < 2_000; i++) registry.checkArguments(tool, c.argumentsJson);
  for (let run = 0; run < runs; run++) {
    cases.forEach((c, index) => {
      let count = 0;
      const start = now();
      let elapsed = 0n;
      while (elapsed < runNs) {
        for (let i = 0; i < 256; i++) registry.checkArguments(tool, c.argumentsJson);
        count += 256;
        elapsed = now() - start;
      }
      results[index]!.perSecond.push(Math.round((count * 1e9) / Number(elapsed)));
    });
  }
  for (const result of results) {
    const sorted = [...result.perSecond].sort((a, b) => a - b);
    result.median = sorted[Math.floor(sorted.length / 2)] ?? 0;
  }
  return results;
}
