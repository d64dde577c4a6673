import { TASK_CLASSES, type TaskClass } from "./dataset.js";
import type { Ratio, SampleScore } from "./scoring.js";

/** A metric over repeats: its mean and range (null where it applied to no run). */
export interface Spread {
  mean: number | null;
  min: number | null;
  max: number | null;
}

/** Who answers for a metric (seed 001 §8): the model and its tool descriptions, the runtime, or the whole. */
export type MetricOwner = "model" | "runtime" | "overall";

/** The metrics of the report, in table order. */
export const METRICS = [
  { key: "tool_selection_accuracy", label: "tool selection accuracy", owner: "model", unit: "%" },
  { key: "structural_compliance", label: "structural compliance of arguments", owner: "model", unit: "%" },
  { key: "business_correctness", label: "business correctness of arguments", owner: "model", unit: "%" },
  { key: "execution_success", label: "execution success", owner: "overall", unit: "%" },
  { key: "unauthorized_stopped", label: "unauthorized actions stopped", owner: "runtime", unit: "%" },
  { key: "unauthorized_executions", label: "unauthorized consequential executions", owner: "runtime", unit: "count" },
  { key: "writes_outside_task", label: "writes outside the task", owner: "runtime", unit: "count" },
  { key: "duplicate_effects", label: "duplicate side effects", owner: "runtime", unit: "count" },
  { key: "faults_contained", label: "faulty results contained", owner: "runtime", unit: "%" },
  { key: "task_completion", label: "task completion", owner: "overall", unit: "%" },
  { key: "mean_turns", label: "mean turns", owner: "overall", unit: "turns" },
  { key: "p95_latency_ms", label: "P95 end-to-end latency", owner: "overall", unit: "ms" },
  { key: "tokens_per_task", label: "tokens per task", owner: "overall", unit: "tokens" },
  { key: "cost_per_task", label: "cost per task", owner: "overall", unit: "usd" },
] as const satisfies readonly { key: string; label: string; owner: MetricOwner; unit: string }[];
export type MetricKey = (typeof METRICS)[number]["key"];

/** One group's figures (a class, or everything) over the repeats. */
export interface GroupReport {
  samples: number;
  metrics: Record<MetricKey, Spread>;
}

/** The JSON report: what ran, against what, and the figures. Pins model, dataset and contracts together (seed 003). */
export interface EvaluationReport {
  dataset: { name: string; samples: number };
  model: string;
  repeats: number;
  /** The contracts in force during the run, by name: version and content hash. */
  contracts: Record<string, { version: string; hash: string }>;
  started_at: string;
  finished_at: string;
  usd_per_1k_tokens: number | null;
  classes: Partial<Record<TaskClass, GroupReport>>;
  overall: GroupReport;
  /** Every run of every sample, by repeat. */
  runs: SampleScore[][];
}

const pooled = (ratios: readonly Ratio[]): number | null => {
  const den = ratios.reduce((s, r) => s + r.den, 0);
  return den === 0 ? null : ratios.reduce((s, r) => s + r.num, 0) / den;
};

function p95(values: readonly number[]): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(0.95 * sorted.length) - 1)]!;
}

const mean = (values: readonly number[]): number | null => (values.length === 0 ? null : values.reduce((s, v) => s + v, 0) / values.length);

/** The figures of one repeat's runs of one group. */
function figures(runs: readonly SampleScore[], usdPer1k: number | null): Record<MetricKey, number | null> {
  const tokens = mean(runs.map((r) => r.tokens));
  return {
    tool_selection_accuracy: pooled(runs.map((r) => r.selection)),
    structural_compliance: pooled(runs.map((r) => r.structural)),
    business_correctness: pooled(runs.map((r) => r.business)),
    execution_success: pooled(runs.map((r) => r.execution)),
    unauthorized_stopped: pooled(runs.map((r) => r.forbidden_stopped)),
    unauthorized_executions: runs.reduce((s, r) => s + r.unauthorized_executions, 0),
    writes_outside_task: runs.reduce((s, r) => s + r.writes_outside_task, 0),
    duplicate_effects: runs.reduce((s, r) => s + r.duplicate_effects, 0),
    faults_contained: pooled(runs.map((r) => r.faults_contained)),
    task_completion: pooled(runs.map((r) => r.completed)),
    mean_turns: mean(runs.map((r) => r.turns)),
    p95_latency_ms: p95(runs.map((r) => r.latency_ms)),
    tokens_per_task: tokens,
    cost_per_task: usdPer1k === null || tokens === null ? null : (tokens / 1000) * usdPer1k,
  };
}

function spread(values: readonly (number | null)[]): Spread {
  const known = values.filter((v): v is number => v !== null);
  if (known.length === 0) return { mean: null, min: null, max: null };
  return { mean: mean(known), min: Math.min(...known), max: Math.max(...known) };
}

/** Aggregates runs (one list per repeat) into a group report: each metric per repeat, then mean and min–max. */
export function groupReport(repeats: readonly (readonly SampleScore[])[], usdPer1k: number | null): GroupReport {
  const perRepeat = repeats.map((runs) => figures(runs, usdPer1k));
  const metrics = Object.fromEntries(METRICS.map((m) => [m.key, spread(perRepeat.map((f) => f[m.key]))])) as Record<MetricKey, Spread>;
  return { samples: repeats[0]?.length ?? 0, metrics };
}

/** Per class (those the dataset has) and overall. */
export function aggregate(repeats: readonly (readonly SampleScore[])[], usdPer1k: number | null): Pick<EvaluationReport, "classes" | "overall"> {
  const classes: Partial<Record<TaskClass, GroupReport>> = {};
  for (const cls of TASK_CLASSES) {
    const runs = repeats.map((r) => r.filter((s) => s.class === cls));
    if (runs[0]?.length) classes[cls] = groupReport(runs, usdPer1k);
  }
  return { classes, overall: groupReport(repeats, usdPer1k) };
}

function formatValue(value: number | null, unit: string): string {
  if (value === null) return "n/a";
  switch (unit) {
    case "%":
      return `${(value * 100).toFixed(value === 1 || value === 0 ? 0 : 1)}%`;
    case "count":
      return String(Math.round(value * 100) / 100);
    case "ms":
      return `${Math.round(value)} ms`;
    case "usd":
      return `$${value.toFixed(4)}`;
    default:
      return (Math.round(value * 100) / 100).toString();
  }
}

function cell(spread: Spread, unit: string, repeats: number): string {
  const value = formatValue(spread.mean, unit);
  if (repeats < 2 || spread.min === null || spread.min === spread.max) return value;
  return `${value} (${formatValue(spread.min, unit)}–${formatValue(spread.max, unit)})`;
}

const OWNER_MARK: Record<MetricOwner, string> = { model: "[model]", runtime: "[runtime]", overall: "" };

/**
 * The report as a text table: one row per metric (marked by who answers for it), one column per class and
 * overall; a cell is the mean over repeats, with min–max when they differ.
 */
export function formatTable(report: Pick<EvaluationReport, "classes" | "overall" | "repeats" | "model" | "dataset">): string {
  const columns = [
    ...TASK_CLASSES.filter((c) => report.classes[c]).map((c) => ({ name: c, group: report.classes[c]! })),
    { name: "overall", group: report.overall },
  ];
  const header = ["metric", ...columns.map((c) => `${c.name} (${c.group.samples})`)];
  const rows = METRICS.map((m) => [`${m.label} ${OWNER_MARK[m.owner]}`.trim(), ...columns.map((c) => cell(c.group.metrics[m.key], m.unit, report.repeats))]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: readonly string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ");
  return [
    `${report.dataset.name}: ${report.dataset.samples} samples × ${report.repeats} repeat${report.repeats === 1 ? "" : "s"}, model ${report.model}`,
    line(header),
    line(widths.map((w) => "-".repeat(w))),
    ...rows.map(line),
  ].join("\n");
}
