import { randomUUID } from "node:crypto";
import type { JsonValue } from "@toolgate/contracts";
import { defineTool, type ToolContractInput, type ToolDefinition, type ToolOutcome } from "@toolgate/registry";
import { InsertBatcher } from "@toolgate/storage";
import type { Collection, Db } from "mongodb";
import { abortableDelay } from "@toolgate/research-tools";
import type { EffectLedger } from "./effect-ledger.js";

// The `chaos` tool set: tools that misbehave on request, for the executor's end-to-end tests and demos.
// Every effect they have is recorded in the side-effect ledger. Never enable it in production.

/** Origin of the chaos HTTP tools; a deployment maps it to a real server (EXECUTOR_HTTP_ENDPOINTS). */
export const CHAOS_HTTP_ORIGIN = "http://chaos-http.toolgate.test";

const owner = "toolgate-tests";
const n = { type: "integer", minimum: 0, maximum: 1_000_000_000 } as const;
const key = { type: "string", minLength: 1, maxLength: 512 } as const;
const operationId = { type: "string", minLength: 1, maxLength: 128 } as const;

/** The status-check answer for a reconciliation (see the contract's `status_check`). */
const reconciliationAnswer = {
  type: "object",
  properties: { state: { enum: ["applied", "not_applied", "unknown"] }, result: {} },
  required: ["state"],
  additionalProperties: false,
} as const;

const writeContract: ToolContractInput = {
  name: "chaos_write",
  version: "1.0.0",
  description:
    "Test tool: records one effect in the side-effect ledger before or after waiting delay_ms, and answers with it. Use only in Toolgate's own tests.",
  owner,
  input_schema: {
    type: "object",
    properties: { n, delay_ms: { type: "integer", minimum: 0, maximum: 10_000 }, effect: { enum: ["before_delay", "after_delay"] } },
    required: ["n", "delay_ms", "effect"],
    additionalProperties: false,
  },
  output_schema: {
    type: "object",
    properties: { n: { type: "integer" }, effect_id: { type: "string" } },
    required: ["n", "effect_id"],
    additionalProperties: false,
  },
  side_effect: "write",
  risk: "low",
  timeout_ms: 1_000,
  idempotency: { kind: "keyed" },
  status_check: { tool: "chaos_write_status" },
};

const keyedWriteContract: ToolContractInput = {
  name: "chaos_keyed_write",
  version: "1.0.0",
  description:
    "Test tool: books an order once per tenant and order id (a business idempotency key), recording one ledger effect. Use only in Toolgate's own tests.",
  owner,
  input_schema: {
    type: "object",
    properties: { order_id: { type: "string", pattern: "^[A-Za-z0-9_-]{1,64}$" }, amount: { type: "integer", minimum: 1, maximum: 1_000_000 } },
    required: ["order_id", "amount"],
    additionalProperties: false,
  },
  output_schema: {
    type: "object",
    properties: { order_id: { type: "string" }, amount: { type: "integer" }, effect_id: { type: "string" } },
    required: ["order_id", "amount", "effect_id"],
    additionalProperties: false,
  },
  side_effect: "write",
  risk: "low",
  timeout_ms: 2_000,
  idempotency: { kind: "keyed", key_template: "{tenant}:{args:/order_id}" },
  status_check: { tool: "chaos_write_status" },
};

const writeStatusContract: ToolContractInput = {
  name: "chaos_write_status",
  version: "1.0.0",
  description: "Test tool: reports whether a ledger-backed chaos tool took effect under an idempotency key. Use only in Toolgate's own tests.",
  owner,
  input_schema: { type: "object", properties: { idempotency_key: key }, required: ["idempotency_key"], additionalProperties: false },
  output_schema: reconciliationAnswer,
  side_effect: "read",
  risk: "low",
  timeout_ms: 2_000,
  idempotency: { kind: "natural" },
};

const flakyContract: ToolContractInput = {
  name: "chaos_flaky",
  version: "1.0.0",
  description:
    "Test tool: fails its first `failures` attempts for a key with `code` (and a Retry-After of retry_after_ms), then records one effect. Use only in Toolgate's own tests.",
  owner,
  input_schema: {
    type: "object",
    properties: {
      n,
      failures: { type: "integer", minimum: 0, maximum: 8 },
      code: { enum: ["UPSTREAM_UNAVAILABLE", "RATE_LIMITED", "STATE_CONFLICT"] },
      retry_after_ms: { type: "integer", minimum: 0, maximum: 10_000 },
    },
    required: ["n", "failures", "code", "retry_after_ms"],
    additionalProperties: false,
  },
  output_schema: {
    type: "object",
    properties: { n: { type: "integer" }, attempts: { type: "integer" }, effect_id: { type: "string" } },
    required: ["n", "attempts", "effect_id"],
    additionalProperties: false,
  },
  side_effect: "write",
  risk: "low",
  timeout_ms: 2_000,
  retry: { max_attempts: 4, base_delay_ms: 100, max_delay_ms: 3_000, max_elapsed_ms: 20_000 },
  idempotency: { kind: "keyed" },
  status_check: { tool: "chaos_write_status" },
};

const jobContract: ToolContractInput = {
  name: "chaos_job",
  version: "1.0.0",
  description:
    "Test tool: starts a job that runs for duration_ms and answers at once with its operation id; follow it with get_operation. Use only in Toolgate's own tests.",
  owner,
  input_schema: {
    type: "object",
    properties: { n, duration_ms: { type: "integer", minimum: 0, maximum: 120_000 } },
    required: ["n", "duration_ms"],
    additionalProperties: false,
  },
  output_schema: {
    type: "object",
    properties: { n: { type: "integer" }, ran_ms: { type: "integer" } },
    required: ["n", "ran_ms"],
    additionalProperties: false,
  },
  side_effect: "write",
  risk: "low",
  timeout_ms: 2_000,
  idempotency: { kind: "keyed" },
  long_running: true,
  status_check: { tool: "chaos_job_status" },
  cancel: { tool: "chaos_job_cancel" },
  operation: { poll_interval_ms: 200, max_duration_ms: 120_000 },
};

const jobStatusContract: ToolContractInput = {
  name: "chaos_job_status",
  version: "1.0.0",
  description:
    "Test tool: reports the state of a chaos job by operation id, or whether one was started under an idempotency key. Use only in Toolgate's own tests; never for real work.",
  owner,
  input_schema: {
    type: "object",
    properties: { operation_id: operationId, idempotency_key: key },
    minProperties: 1,
    maxProperties: 1,
    additionalProperties: false,
  },
  output_schema: {
    type: "object",
    properties: {
      state: { enum: ["applied", "not_applied", "unknown", "accepted", "running", "succeeded", "failed", "cancelled"] },
      result: {},
    },
    required: ["state"],
    additionalProperties: false,
  },
  side_effect: "read",
  risk: "low",
  timeout_ms: 2_000,
  idempotency: { kind: "natural" },
};

const jobCancelContract: ToolContractInput = {
  name: "chaos_job_cancel",
  version: "1.0.0",
  description:
    "Test tool: cancels a chaos job that has not finished; STATE_CONFLICT when it already has. Use only in Toolgate's own tests; never for real work.",
  owner,
  input_schema: { type: "object", properties: { operation_id: operationId }, required: ["operation_id"], additionalProperties: false },
  output_schema: { type: "object", properties: { cancelled: { type: "boolean" } }, required: ["cancelled"], additionalProperties: false },
  side_effect: "write",
  risk: "low",
  timeout_ms: 2_000,
  idempotency: { kind: "natural" },
};

const crashContract: ToolContractInput = {
  name: "chaos_crash",
  version: "1.0.0",
  description: "Test tool: kills the executor process that runs it (a poison message). Use only in Toolgate's own tests.",
  owner,
  input_schema: { type: "object", properties: { n }, required: ["n"], additionalProperties: false },
  output_schema: { type: "object", properties: { n: { type: "integer" } }, required: ["n"], additionalProperties: false },
  side_effect: "none",
  risk: "low",
  timeout_ms: 1_000,
  idempotency: { kind: "natural" },
};

const faultWriteContract: ToolContractInput = {
  name: "chaos_fault_write",
  version: "1.0.0",
  description:
    "Test tool: a write that fails on request before or after recording its ledger effect — the executor process is killed, the connection is reset (ECONNRESET), or the write is refused before anything happened. Use only in Toolgate's own tests; never for real work.",
  owner,
  input_schema: {
    type: "object",
    properties: {
      n,
      fault: { enum: ["crash_before_effect", "crash_after_effect", "reset_before_effect", "reset_after_effect", "refused_before_effect", "none"] },
    },
    required: ["n", "fault"],
    additionalProperties: false,
  },
  output_schema: {
    type: "object",
    properties: { n: { type: "integer" }, effect_id: { type: "string" } },
    required: ["n", "effect_id"],
    additionalProperties: false,
  },
  side_effect: "write",
  risk: "low",
  timeout_ms: 1_000,
  idempotency: { kind: "keyed" },
  status_check: { tool: "chaos_write_status" },
};

const misbehaveContract: ToolContractInput = {
  name: "chaos_misbehave",
  version: "1.0.0",
  description:
    "Test tool: answers outside its contract on request (wrong shape, too large, an exception with internals, or an explicitly truncated result). Use only in Toolgate's own tests; never for real work.",
  owner,
  input_schema: {
    type: "object",
    properties: { mode: { enum: ["invalid_result", "too_large", "throws", "truncated", "ok"] } },
    required: ["mode"],
    additionalProperties: false,
  },
  output_schema: { type: "object", properties: { text: { type: "string", maxLength: 4_096 } }, required: ["text"], additionalProperties: false },
  side_effect: "none",
  risk: "low",
  timeout_ms: 1_000,
  idempotency: { kind: "natural" },
  limits: { max_argument_bytes: 1_024, max_result_bytes: 512, max_depth: 4 },
};

const httpWriteContract: ToolContractInput = {
  name: "chaos_http_write",
  version: "1.0.0",
  description:
    "Test tool behind HTTP: the far side applies one effect per Idempotency-Key; `mode` makes it unavailable once or slow. Use only in Toolgate's own tests; never for real work.",
  owner,
  input_schema: {
    type: "object",
    properties: { n, mode: { enum: ["ok", "unavailable_once", "slow_applied", "server_error"] } },
    required: ["n", "mode"],
    additionalProperties: false,
  },
  output_schema: {
    type: "object",
    properties: { n: { type: "integer" }, effects: { type: "integer" } },
    required: ["n", "effects"],
    additionalProperties: false,
  },
  side_effect: "external",
  risk: "low",
  timeout_ms: 1_000,
  retry: { max_attempts: 3, base_delay_ms: 100, max_delay_ms: 5_000 },
  idempotency: { kind: "keyed" },
  status_check: { tool: "chaos_http_status" },
  transport: { kind: "http", url: `${CHAOS_HTTP_ORIGIN}/write`, method: "POST" },
};

const httpStatusContract: ToolContractInput = {
  name: "chaos_http_status",
  version: "1.0.0",
  description:
    "Test tool behind HTTP: reports whether chaos_http_write took effect under an idempotency key. Use only in Toolgate's own tests; never for real work.",
  owner,
  input_schema: { type: "object", properties: { idempotency_key: key }, required: ["idempotency_key"], additionalProperties: false },
  output_schema: reconciliationAnswer,
  side_effect: "read",
  risk: "low",
  timeout_ms: 1_000,
  idempotency: { kind: "natural" },
  transport: { kind: "http", url: `${CHAOS_HTTP_ORIGIN}/status`, method: "POST" },
};

/**
 * Approved definition of the `greet` tool of the test MCP server (test/fixtures/mutable-mcp-server.mjs). The
 * server changes the definition on request, which must quarantine it.
 */
export const MUTABLE_GREET_DEFINITION_HASH = "sha256:6ce5b397877083403adf19402713749dd6417236f9e2a90893a10bb64c0a4104";

const mcpGreetContract: ToolContractInput = {
  name: "chaos_mcp_greet",
  version: "1.0.0",
  description: "Test tool on an MCP server whose definition can change at run time: greets a name. Use only in Toolgate's own tests; never for real work.",
  owner,
  input_schema: { type: "object", properties: { name: { type: "string", minLength: 1, maxLength: 64 } }, required: ["name"], additionalProperties: false },
  output_schema: {
    type: "object",
    properties: {
      content: {
        type: "array",
        maxItems: 8,
        items: { type: "object", properties: { type: { type: "string" }, text: { type: "string" } }, required: ["type"], additionalProperties: false },
      },
    },
    required: ["content"],
    additionalProperties: false,
  },
  side_effect: "none",
  risk: "low",
  timeout_ms: 2_000,
  idempotency: { kind: "natural" },
  transport: { kind: "mcp", server: "mutable", tool: "greet", definition_hash: MUTABLE_GREET_DEFINITION_HASH },
};

/** Contracts of the chaos tool set. */
export const chaosContracts: ToolContractInput[] = [
  writeContract,
  keyedWriteContract,
  writeStatusContract,
  flakyContract,
  jobContract,
  jobStatusContract,
  jobCancelContract,
  crashContract,
  faultWriteContract,
  misbehaveContract,
  httpWriteContract,
  httpStatusContract,
  mcpGreetContract,
];

/** The error a driver or socket raises when the peer resets the connection. */
function connectionReset(): Error {
  return Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET", errno: -104, syscall: "read" });
}

interface JobRecord {
  _id: string;
  idempotency_key: string;
  n: number;
  started_at: Date;
  run_until: Date;
}

/** The one final state of a job: finishing and cancelling race on this unique insert. */
interface JobFinal {
  _id: string;
  state: "succeeded" | "cancelled";
  at: Date;
}

interface FailureMarker {
  _id: string;
  at: Date;
}

const int = (value: JsonValue | undefined): number => (typeof value === "number" ? value : 0);
const text = (value: JsonValue | undefined): string => (typeof value === "string" ? value : "");

/** Tells the reconciling executor what the ledger holds for a key. */
async function ledgerStatus(ledger: EffectLedger, idempotencyKey: string): Promise<ToolOutcome> {
  const effect = await ledger.find(idempotencyKey);
  if (!effect) return { ok: true, data: { state: "not_applied" } };
  return { ok: true, data: effect.data === undefined ? { state: "applied" } : { state: "applied", result: effect.data } };
}

/**
 * The chaos tools with their in-process implementations (the HTTP and MCP ones run elsewhere). State lives in
 * `db` (`chaos_jobs`, `chaos_job_finals`, `chaos_failures`); effects go to the ledger.
 */
export function chaosTools(db: Db, ledger: EffectLedger): ToolDefinition[] {
  const jobs: Collection<JobRecord> = db.collection<JobRecord>("chaos_jobs");
  const finals: Collection<JobFinal> = db.collection<JobFinal>("chaos_job_finals");
  const finalInserts = new InsertBatcher(finals);
  const markers = new InsertBatcher(db.collection<FailureMarker>("chaos_failures"));

  async function finalOf(jobId: string): Promise<JobFinal | null> {
    return finals.findOne({ _id: jobId });
  }

  return [
    defineTool(writeContract, async (args, ctx) => {
      // The effect is recorded with the answer the tool gives, so a status check can return that answer.
      const answer = { n: int(args.n), effect_id: randomUUID() };
      const before = args.effect === "before_delay";
      if (before) await ledger.record("chaos_write", ctx.idempotencyKey, ctx.callId, answer);
      if ((await abortableDelay(int(args.delay_ms), ctx.signal)) === "aborted" && !before) {
        return { ok: false, code: "TIMEOUT", message: "stopped before taking effect" };
      }
      if (!before) await ledger.record("chaos_write", ctx.idempotencyKey, ctx.callId, answer);
      return { ok: true, data: answer };
    }),
    defineTool(keyedWriteContract, async (args, ctx) => {
      // A short wait widens the window in which concurrent duplicates meet.
      await abortableDelay(100, ctx.signal);
      const answer = { order_id: text(args.order_id), amount: int(args.amount), effect_id: randomUUID() };
      await ledger.record("chaos_keyed_write", ctx.idempotencyKey, ctx.callId, answer);
      return { ok: true, data: answer };
    }),
    defineTool(writeStatusContract, async (args) => ledgerStatus(ledger, text(args.idempotency_key))),
    defineTool(flakyContract, async (args, ctx) => {
      const failures = int(args.failures);
      for (let i = 1; i <= failures; i++) {
        // One marker per failed attempt, shared by every executor: the i-th attempt of a key fails.
        if ((await markers.insert({ _id: `${ctx.idempotencyKey}#${i}`, at: new Date() })) === "inserted") {
          const retryAfter = int(args.retry_after_ms);
          const code = args.code === "RATE_LIMITED" ? "RATE_LIMITED" : args.code === "STATE_CONFLICT" ? "STATE_CONFLICT" : "UPSTREAM_UNAVAILABLE";
          return {
            ok: false,
            code,
            message: `attempt ${i} failed on purpose`,
            retryable: code !== "STATE_CONFLICT",
            ...(retryAfter > 0 ? { details: { retry_after_ms: retryAfter } } : {}),
          };
        }
      }
      const answer = { n: int(args.n), attempts: failures + 1, effect_id: randomUUID() };
      await ledger.record("chaos_flaky", ctx.idempotencyKey, ctx.callId, answer);
      return { ok: true, data: answer };
    }),
    defineTool(jobContract, async (args, ctx) => {
      const id = `job_${randomUUID()}`;
      const now = Date.now();
      await jobs.insertOne({
        _id: id,
        idempotency_key: ctx.idempotencyKey,
        n: int(args.n),
        started_at: new Date(now),
        run_until: new Date(now + int(args.duration_ms)),
      });
      await ledger.record("chaos_job", ctx.idempotencyKey, ctx.callId);
      return { ok: "accepted", operation_id: id };
    }),
    defineTool(jobStatusContract, async (args) => {
      if (typeof args.idempotency_key === "string") {
        const job = await jobs.findOne({ idempotency_key: args.idempotency_key });
        return { ok: true, data: { state: job ? "applied" : "not_applied" } };
      }
      const job = await jobs.findOne({ _id: text(args.operation_id) });
      if (!job) return { ok: false, code: "OBJECT_NOT_FOUND", message: "no such job" };
      let final = await finalOf(job._id);
      if (!final && Date.now() >= job.run_until.getTime()) {
        await finalInserts.insert({ _id: job._id, state: "succeeded", at: new Date() });
        final = await finalOf(job._id);
      }
      if (!final) return { ok: true, data: { state: "running" } };
      if (final.state === "cancelled") return { ok: true, data: { state: "cancelled" } };
      return { ok: true, data: { state: "succeeded", result: { n: job.n, ran_ms: job.run_until.getTime() - job.started_at.getTime() } } };
    }),
    defineTool(jobCancelContract, async (args) => {
      const job = await jobs.findOne({ _id: text(args.operation_id) });
      if (!job) return { ok: false, code: "OBJECT_NOT_FOUND", message: "no such job" };
      if (Date.now() < job.run_until.getTime()) await finalInserts.insert({ _id: job._id, state: "cancelled", at: new Date() });
      const final = await finalOf(job._id);
      if (final?.state === "cancelled") return { ok: true, data: { cancelled: true } };
      return { ok: false, code: "STATE_CONFLICT", message: "the job already finished" };
    }),
    defineTool(crashContract, () => {
      process.kill(process.pid, "SIGKILL");
      return new Promise<ToolOutcome>(() => undefined);
    }),
    defineTool(faultWriteContract, async (args, ctx) => {
      const answer = { n: int(args.n), effect_id: randomUUID() };
      const record = async (): Promise<void> => {
        await ledger.record("chaos_fault_write", ctx.idempotencyKey, ctx.callId, answer);
      };
      switch (args.fault) {
        case "crash_before_effect":
          // At once, before anything the process queued for the network could leave it.
          process.kill(process.pid, "SIGKILL");
          return new Promise<ToolOutcome>(() => undefined);
        case "crash_after_effect":
          await record();
          process.kill(process.pid, "SIGKILL");
          return new Promise<ToolOutcome>(() => undefined);
        case "reset_before_effect":
          // The connection breaks while the write is on its way and before it lands.
          await abortableDelay(5, ctx.signal);
          throw connectionReset();
        case "reset_after_effect":
          // The write landed and its acknowledgement was lost with the connection.
          await record();
          throw connectionReset();
        case "refused_before_effect":
          await abortableDelay(5, ctx.signal);
          // A tool's own error that says nothing was applied.
          throw Object.assign(new Error("the write was refused before anything was stored"), { applied: false });
        default:
          await record();
          return { ok: true, data: answer };
      }
    }),
    defineTool(misbehaveContract, (args) => {
      switch (args.mode) {
        case "invalid_result":
          return Promise.resolve({ ok: true, data: { text: 42, extra: true } });
        case "too_large":
          return Promise.resolve({ ok: true, data: { text: "x".repeat(2_000) } });
        case "throws":
          return Promise.reject(new Error("connect ECONNREFUSED postgres://admin:hunter2@db.internal:5432/prod at /srv/toolgate/secret-module.ts:42"));
        case "truncated":
          return Promise.resolve({ ok: true, data: { text: "the first part" }, truncated: true });
        default:
          return Promise.resolve({ ok: true, data: { text: "fine" } });
      }
    }),
  ];
}
