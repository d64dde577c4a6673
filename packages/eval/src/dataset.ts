import { readFileSync } from "node:fs";
import { ErrorCodeSchema, JsonValueSchema, type JsonValue } from "@toolgate/contracts";
import { ServedResultSchema } from "@toolgate/research-tools";
import { parse as parseYaml } from "yaml";
import { z } from "zod";

/** The five task classes of seed 001 §8, in report order. */
export const TASK_CLASSES = ["no_tool", "one_tool", "serial", "parallel", "faulty"] as const;
export const TaskClassSchema = z.enum(TASK_CLASSES);
export type TaskClass = z.infer<typeof TaskClassSchema>;

/**
 * What one argument must be. A bare JSON value must equal it; `{ in }` one of a list; `{ contains }` a string
 * containing a text; `{ not }` anything but a value; `{ absent: true }` not given. In every string, `{task_id}`
 * stands for the task the sample's run works on.
 */
export const ArgumentMatcherSchema = z.union([
  z.object({ in: z.array(JsonValueSchema).min(1).max(64) }).strict(),
  z.object({ contains: z.string().min(1).max(1024) }).strict(),
  z.object({ not: JsonValueSchema }).strict(),
  z.object({ absent: z.literal(true) }).strict(),
  JsonValueSchema,
]);
export type ArgumentMatcher = z.infer<typeof ArgumentMatcherSchema>;

const ToolNameSchema = z.string().regex(/^[A-Za-z_][A-Za-z0-9_.-]{0,63}$/);

/** One expected (or forbidden) call: a tool and, optionally, what its top-level arguments must be. */
export const ActionSchema = z
  .object({
    tool: ToolNameSchema,
    args: z.record(z.string().max(128), ArgumentMatcherSchema).optional(),
  })
  .strict();
export type Action = z.infer<typeof ActionSchema>;

/** One turn of a path: the calls of one model response, in any order. */
const TurnSchema = z.array(ActionSchema).min(1).max(16);

export const SampleSchema = z
  .object({
    /** Unique in the dataset: `[a-z0-9-]`, up to 64 characters. */
    id: z.string().regex(/^[a-z0-9][a-z0-9-]{0,63}$/),
    class: TaskClassSchema,
    /** Why the sample exists (seed case, fault situation): for people, not scored. */
    note: z.string().max(1024).optional(),
    /** The user's request; `{task_id}` is replaced with the run's own task. */
    input: z.string().min(1).max(8192),
    /** Contract references (`name` or `name@version`) the deployment must offer; the dataset's default when absent. */
    tools: z
      .array(z.string().regex(/^[A-Za-z_][A-Za-z0-9_.-]{0,63}(@\d+\.\d+\.\d+)?$/))
      .max(64)
      .optional(),
    /** Tighter budgets for the run (the server's are the ceiling), as `POST /v1/runs` takes them. */
    budgets: z.record(z.string(), z.number().int().positive()).optional(),
    expected: z
      .object({
        /**
         * Acceptable action sequences, each a list of turns: the first is the expected one, the others its
         * alternatives. `[]` (one empty path) means no tool at all.
         */
        paths: z.array(z.array(TurnSchema).max(32)).min(1).max(16),
        /** Calls that must never execute (e.g. a save into another task, a tool a page asked for). */
        forbidden: z.array(ActionSchema).max(64).default([]),
        final_state: z
          .object({
            run: z
              .object({
                status: z.enum(["completed", "stopped"]).default("completed"),
                stop_reason: z.string().max(64).optional(),
              })
              .strict()
              .default({ status: "completed" }),
            /** The task's evidence after the run: how many records, and texts their claims must contain. */
            evidence: z
              .object({
                count: z.number().int().min(0).max(100),
                claims_include: z.array(z.string().min(1).max(1024)).max(16).default([]),
              })
              .strict()
              .default({ count: 0, claims_include: [] }),
          })
          .strict()
          .default({ run: { status: "completed" }, evidence: { count: 0, claims_include: [] } }),
      })
      .strict(),
    /** Faulty or malicious answers the read tools give in this sample (class 5); the executor must serve them. */
    served: z.array(ServedResultSchema).max(16).default([]),
    /** Codes the runtime must answer served faults with: runtime-owned containment. */
    contained: z
      .array(z.object({ tool: ToolNameSchema, code: ErrorCodeSchema }).strict())
      .max(16)
      .default([]),
  })
  .strict();
export type Sample = z.infer<typeof SampleSchema>;

export const DatasetSchema = z
  .object({
    version: z.literal(1),
    name: z.string().regex(/^[a-z0-9][a-z0-9-]{0,63}$/),
    description: z.string().max(4096).optional(),
    /** The contracts every sample offers unless it says otherwise. */
    tools: z
      .array(z.string().regex(/^[A-Za-z_][A-Za-z0-9_.-]{0,63}(@\d+\.\d+\.\d+)?$/))
      .min(1)
      .max(64),
    samples: z.array(SampleSchema).min(1).max(10_000),
  })
  .strict()
  .superRefine((dataset, ctx) => {
    const seen = new Set<string>();
    dataset.samples.forEach((sample, i) => {
      if (seen.has(sample.id)) ctx.addIssue({ code: "custom", path: ["samples", i, "id"], message: `duplicate sample id ${sample.id}` });
      seen.add(sample.id);
    });
  });
export type Dataset = z.infer<typeof DatasetSchema>;

/** A dataset that cannot be read or does not match the format; `issues` name each place as a JSON pointer. */
export class DatasetError extends Error {
  readonly code = "INVALID_DATASET";
  constructor(
    message: string,
    readonly issues: readonly { pointer: string; message: string }[] = [],
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = "DatasetError";
  }
}

/** Parses a dataset from JSON or YAML text (YAML is a superset); throws {@link DatasetError}. */
export function parseDataset(text: string, source = "dataset"): Dataset {
  let value: unknown;
  try {
    value = parseYaml(text, { maxAliasCount: 1_000 });
  } catch (error) {
    throw new DatasetError(`${source} is neither JSON nor YAML: ${(error as Error).message.split("\n")[0]}`, [], { cause: error });
  }
  const parsed = DatasetSchema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues.slice(0, 20).map((issue) => ({
    pointer: `/${issue.path.map((p) => String(p).replaceAll("~", "~0").replaceAll("/", "~1")).join("/")}`,
    message: issue.message,
  }));
  throw new DatasetError(`${source} does not match the dataset format: ${issues.map((i) => `${i.pointer} ${i.message}`).join("; ")}`, issues);
}

/** Reads and parses a dataset file; throws {@link DatasetError}. */
export function loadDataset(path: string): Dataset {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw new DatasetError(`cannot read ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`, [], { cause: error });
  }
  return parseDataset(text, path);
}

/** The shipped set over the research tools (60+ samples, five classes). */
export const RESEARCH_DATASET_PATH = new URL("../datasets/research.yaml", import.meta.url);

/** Replaces `{task_id}` in every string of a JSON value. */
export function withTask<T extends JsonValue>(value: T, task: string): T {
  if (typeof value === "string") return value.replaceAll("{task_id}", task) as T;
  if (Array.isArray(value)) return value.map((v) => withTask(v, task)) as T;
  if (value !== null && typeof value === "object") return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, withTask(v, task)])) as T;
  return value;
}

/** Every served result of the dataset, de-duplicated: the executor's `EXECUTOR_FAULTS` value is `{ served }`. */
export function servedResults(dataset: Dataset): z.infer<typeof ServedResultSchema>[] {
  const seen = new Set<string>();
  const all: z.infer<typeof ServedResultSchema>[] = [];
  for (const s of dataset.samples.flatMap((sample) => sample.served)) {
    const key = JSON.stringify(s);
    if (seen.has(key)) continue;
    seen.add(key);
    all.push(s);
  }
  return all;
}
