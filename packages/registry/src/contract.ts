import { canonicalHash, HashSchema } from "@toolgate/contracts";
import { z } from "zod";
import { JSON_POINTER_PATTERN } from "./json-pointer.js";

const jsonPointer = z.string().regex(JSON_POINTER_PATTERN, "expected an RFC 6901 JSON pointer");

/** A JSON Schema document (2020-12); checked structurally by ajv when the registry compiles it. */
const JsonSchemaObject = z.record(z.string(), z.unknown());

/**
 * A companion tool the executor calls itself (read-only for status checks). The status-check protocol:
 * called with `{ "idempotency_key" }` it answers `{ "state": "applied" | "not_applied" | "unknown", "result"? }`
 * (reconciling an unknown outcome); called with `{ "operation_id" }` it answers `{ "state": "accepted" |
 * "running" | "succeeded" | "failed" | "cancelled", "result"?, "error"? }` (tracking a long-running operation),
 * where `result` matches the output schema of the tool it checks. A cancel tool is called with `{ "operation_id" }`.
 */
const StatusCheckSchema = z.object({ tool: z.string().regex(/^[a-z][a-z0-9_]{0,63}$/) });

/** The deepest nesting a contract may allow its arguments (`limits.max_depth`). */
export const MAX_ARGUMENT_DEPTH = 64;

/**
 * A tool contract: what the model needs (name, description, input schema) and what the runtime needs
 * (side-effect class, risk, permissions, approval, timeout, retries, idempotency, limits, sensitive
 * fields, target resources, whether output is untrusted content). Versioned and content-hashed.
 */
export const ToolContractSchema = z.object({
  name: z.string().regex(/^[a-z][a-z0-9_]{0,63}$/, "tool names are stable snake_case identifiers"),
  /**
   * Other names a model may call the tool by, such as the name it had where it was imported from (`uber.ride`,
   * `GetWeather`). The registry resolves them to this contract; exports and events use `name`.
   */
  aliases: z
    .array(
      z
        .string()
        .min(1)
        .max(256)
        .regex(/^[^\p{Cc}]+$/u, "aliases hold no control characters"),
    )
    .max(16)
    .default([]),
  version: z.string().regex(/^\d+\.\d+\.\d+$/, "expected a semantic version"),
  description: z.string().min(20).max(2048),
  owner: z.string().min(1).max(128),
  input_schema: JsonSchemaObject,
  output_schema: JsonSchemaObject,
  side_effect: z.enum(["none", "read", "write", "external"]),
  /**
   * What the writes of a `write` or `external` tool do to what already exists: `additive` when they only add
   * (append-only records, new objects) and never change or remove anything; `destructive` when they may. Absent:
   * taken as destructive (what an MCP host is told, `destructiveHint`), the safe assumption for a tool that writes.
   */
  write_effect: z.enum(["additive", "destructive"]).optional(),
  risk: z.enum(["low", "medium", "high"]),
  permissions: z.array(z.string().min(1).max(128)).max(32).default([]),
  approval: z.enum(["never", "always", "when_tainted"]).default("never"),
  timeout_ms: z.number().int().min(1).max(3_600_000),
  retry: z
    .object({
      max_attempts: z.number().int().min(1).max(10),
      base_delay_ms: z.number().int().min(1).max(60_000),
      max_delay_ms: z.number().int().min(1).max(600_000),
      /** Time budget: no retry starts later than this after the first attempt (absent: only the attempt budget). */
      max_elapsed_ms: z.number().int().min(1).max(3_600_000).optional(),
    })
    .default({ max_attempts: 1, base_delay_ms: 100, max_delay_ms: 1_000 }),
  idempotency: z.discriminatedUnion("kind", [
    z.object({ kind: z.literal("natural") }),
    z.object({ kind: z.literal("keyed"), key_template: z.string().min(1).max(256).optional() }),
    z.object({ kind: z.literal("none") }),
  ]),
  status_check: StatusCheckSchema.optional(),
  /** The tool may answer `accepted` with an operation id and finish later (accepted → running → succeeded/failed/cancelled). */
  long_running: z.boolean().default(false),
  /** Tool that cancels a long-running operation of this tool. */
  cancel: StatusCheckSchema.optional(),
  /** How the executor follows a long-running operation (absent: the executor's defaults). */
  operation: z
    .object({
      /** First wait between two status checks; later waits grow up to ten times this. */
      poll_interval_ms: z.number().int().min(50).max(600_000),
      /** An operation still unfinished after this is cancelled (or failed when it cannot be). */
      max_duration_ms: z
        .number()
        .int()
        .min(1_000)
        .max(7 * 24 * 3_600_000),
    })
    .optional(),
  /** Where the implementation runs: in the executor's process (default), behind HTTP, or on an MCP server. */
  transport: z
    .discriminatedUnion("kind", [
      z.object({ kind: z.literal("in_process") }),
      z.object({ kind: z.literal("http"), url: z.url(), method: z.enum(["POST", "PUT"]).default("POST") }),
      z.object({
        kind: z.literal("mcp"),
        server: z.string().regex(/^[a-z][a-z0-9_-]{0,63}$/),
        tool: z.string().min(1).max(128),
        /**
         * Approved hash of the server's definition of the tool (name, title, description, schemas, annotations).
         * The executor runs the tool only while the server presents exactly this definition.
         */
        definition_hash: HashSchema.optional(),
      }),
    ])
    .default({ kind: "in_process" }),
  limits: z
    .object({
      max_argument_bytes: z
        .number()
        .int()
        .min(2)
        .max(256 * 1024),
      max_result_bytes: z
        .number()
        .int()
        .min(2)
        .max(4 * 1024 * 1024),
      max_depth: z.number().int().min(1).max(MAX_ARGUMENT_DEPTH),
    })
    .default({ max_argument_bytes: 16 * 1024, max_result_bytes: 256 * 1024, max_depth: 16 }),
  /** JSON pointers into the arguments whose values are redacted in logs and audit records. */
  sensitive: z.array(jsonPointer).max(64).default([]),
  /** JSON pointers into a successful result's data whose values are redacted in logs and audit records (the model still gets them). */
  sensitive_results: z.array(jsonPointer).max(64).default([]),
  /** JSON pointers naming the resources the call acts on, with their type, for resource-level checks. */
  resources: z
    .array(z.object({ type: z.string().min(1).max(64), pointer: jsonPointer }))
    .max(16)
    .default([]),
  /** The tool returns content from outside (web pages, documents): it taints the run. */
  untrusted_output: z.boolean().default(false),
  enabled: z.boolean().default(true),
});

/** A validated contract with every default applied. */
export type ToolContract = z.infer<typeof ToolContractSchema>;
/** A contract as written by its author (defaults may be omitted). */
export type ToolContractInput = z.input<typeof ToolContractSchema>;

/**
 * Fields added to contracts after their first version, hashed only when set: a contract that does not use one
 * keeps the hash it had before the field existed, so pinned hashes, signed decisions and pending approvals
 * survive an upgrade.
 */
const HASHED_WHEN_SET = ["sensitive_results", "aliases"] as const;

/** Content hash of a contract: any change to what the model sees or the runtime enforces changes it. */
export function contractHash(contract: ToolContract): string {
  const hashed: Record<string, unknown> = { ...contract };
  for (const field of HASHED_WHEN_SET) {
    const value = hashed[field];
    if (Array.isArray(value) && value.length === 0) delete hashed[field];
  }
  return canonicalHash(hashed);
}
