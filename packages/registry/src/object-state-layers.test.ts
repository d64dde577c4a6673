import { newCallId, newRunId, type JsonValue } from "@toolgate/contracts";
import { describe, expect, it } from "vitest";
import { lintContract } from "./contract-lint.js";
import { defineTool, layeredHandler, type ToolContext, type ToolDefinition } from "./define-tool.js";
import { ToolRegistry } from "./registry.js";

// Seed 003's example: a job id that is well-formed need not name exactly one job (same-named jobs in two
// projects are common), and a job that exists need not allow the change (it may already have finished).
interface Job {
  id: string;
  project: string;
  name: string;
  state: "RUNNING" | "FINISHED";
}

function jobStore(): { jobs: Job[]; stopped: string[] } {
  return {
    jobs: [
      { id: "job_1", project: "ads", name: "nightly-etl", state: "RUNNING" },
      { id: "job_2", project: "search", name: "nightly-etl", state: "RUNNING" },
      { id: "job_3", project: "ads", name: "backfill", state: "FINISHED" },
      { id: "job_4", project: "ads", name: "reindex", state: "RUNNING" },
    ],
    stopped: [],
  };
}

/** `stop_job`: the job is named by id or by name; the resolver turns it into exactly one job. */
function stopJob(store: ReturnType<typeof jobStore>): ToolDefinition {
  return defineTool(
    {
      name: "stop_job",
      version: "1.0.0",
      description: "Stops one running job, named by its id or its name. Use it when the user asks to stop a job; do not use it to pause or restart one.",
      owner: "tests",
      input_schema: {
        type: "object",
        properties: { job: { type: "string", minLength: 1, maxLength: 64 } },
        required: ["job"],
        additionalProperties: false,
      },
      output_schema: { type: "object", properties: { stopped: { type: "string", maxLength: 64 } }, required: ["stopped"], additionalProperties: false },
      side_effect: "write",
      risk: "medium",
      approval: "when_tainted",
      timeout_ms: 1000,
      idempotency: { kind: "keyed" },
      status_check: { tool: "get_job" },
      resources: [{ type: "job", pointer: "/job" }],
    },
    (args, _ctx) => {
      store.stopped.push(jobName(args.job));
      return Promise.resolve({ ok: true, data: { stopped: jobName(args.job) } });
    },
    {
      resolve: (args) => {
        const matches = store.jobs.filter((j) => j.id === args.job || j.name === args.job);
        if (matches.length === 0) return Promise.resolve({ ok: false, code: "OBJECT_NOT_FOUND", message: `no job is called ${jobName(args.job)}` });
        if (matches.length > 1) {
          return Promise.resolve({
            ok: false,
            code: "AMBIGUOUS_OBJECT",
            message: `${jobName(args.job)} names ${matches.length} jobs (${matches.map((j) => `${j.project}/${j.id}`).join(", ")}); give the job id`,
          });
        }
        return Promise.resolve({ ok: true, objects: { job: matches[0]! as unknown as JsonValue } });
      },
      precheck: (_args, objects) => {
        const job = objects.job as unknown as Job;
        return Promise.resolve(job.state === "RUNNING" ? { ok: true } : { ok: false, code: "STATE_CONFLICT", message: `job ${job.id} has already finished` });
      },
    },
  );
}

/** The job argument as text (the schema makes it a string). */
function jobName(value: JsonValue | undefined): string {
  return typeof value === "string" ? value : JSON.stringify(value);
}

function context(): ToolContext {
  return {
    callId: newCallId(),
    runId: newRunId(),
    principal: { tenant: "acme", subject: "alice", roles: ["operator"] },
    context: {},
    idempotencyKey: "key",
    signal: new AbortController().signal,
  };
}

/** The three layers in order, as a call goes through them: structure (policy), objects and state (executor). */
async function call(store: ReturnType<typeof jobStore>, argumentsJson: string) {
  const definition = stopJob(store);
  const registry = ToolRegistry.from([definition.contract]);
  const checked = registry.checkArguments(registry.get("stop_job")!, argumentsJson);
  if (!checked.ok) return { layer: "structural", code: checked.code };
  const outcome = await layeredHandler(definition)(checked.arguments, context());
  return outcome.ok === true ? { layer: "handler", data: outcome.data } : { layer: "object/state", ...outcome };
}

describe("the three validation layers, each with its own outcome", () => {
  it("the contract of the example tool itself passes the linter", () => {
    expect(lintContract(stopJob(jobStore()).contract).findings.filter((f) => f.severity === "error")).toEqual([]);
  });

  it("structural: an unknown force: true never reaches the resolver", async () => {
    const store = jobStore();
    expect(await call(store, '{"job":"job_1","force":true}')).toEqual({ layer: "structural", code: "INVALID_ARGUMENTS" });
    expect(store.stopped).toEqual([]);
  });

  it("object: an id that names no job is OBJECT_NOT_FOUND", async () => {
    const store = jobStore();
    expect(await call(store, '{"job":"job_9"}')).toMatchObject({ layer: "object/state", ok: false, code: "OBJECT_NOT_FOUND", retryable: false });
    expect(store.stopped).toEqual([]);
  });

  it("object: a name that resolves to two jobs is AMBIGUOUS_OBJECT, and the message lists them", async () => {
    const store = jobStore();
    const result = await call(store, '{"job":"nightly-etl"}');
    expect(result).toMatchObject({ layer: "object/state", ok: false, code: "AMBIGUOUS_OBJECT", retryable: false });
    expect((result as { message: string }).message).toContain("ads/job_1, search/job_2");
    expect(store.stopped).toEqual([]);
  });

  it("state: a job that has already finished is STATE_CONFLICT", async () => {
    const store = jobStore();
    expect(await call(store, '{"job":"backfill"}')).toMatchObject({ layer: "object/state", ok: false, code: "STATE_CONFLICT", retryable: false });
    expect(store.stopped).toEqual([]);
  });

  it("a call that passes every layer runs the handler once", async () => {
    const store = jobStore();
    expect(await call(store, '{"job":"reindex"}')).toEqual({ layer: "handler", data: { stopped: "reindex" } });
    expect(store.stopped).toEqual(["reindex"]);
  });

  it("a definition without layers runs its handler directly", () => {
    const definition = defineTool(stopJob(jobStore()).contract, () => Promise.resolve({ ok: true, data: null }));
    expect(layeredHandler(definition)).toBe(definition.handler);
  });
});
