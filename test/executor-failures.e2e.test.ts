import { callTool, eventTrail, resultOf, Stack, testInfra, waitFor, waitForCallEvents, type AuditedEvent, settledCallEvents } from "@toolgate/testkit";
import { MongoClient, type Db } from "mongodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// How the executor fails: output outside the contract, timeouts of side-effecting tools (unknown outcomes and
// their reconciliation), retries, long-running operations and a poison message, through the real services.

let stack: Stack;
let mongo: MongoClient;
let tools: Db;
let runtime: Db;

type Event = AuditedEvent["event"];
const ofType = (events: Event[], type: string): Event[] => events.filter((e) => e.type === type);
const terminal = (events: Event[]): Event[] => events.filter((e) => ["completed", "outcome_unknown", "rejected", "denied"].includes(e.type));

beforeAll(async () => {
  const infra = testInfra();
  stack = await Stack.start({
    natsUrl: infra.natsUrl,
    mongoUrl: infra.mongoUrl,
    toolsets: ["chaos", "operations"],
    executors: 2,
    env: {
      executor: {
        EXECUTOR_ACK_WAIT_MS: "2000",
        EXECUTOR_LEASE_MARGIN_MS: "500",
        EXECUTOR_RECONCILE_DELAY_MS: "300",
        EXECUTOR_OPERATION_POLL_MS: "200",
        EXECUTOR_MAX_ABANDONED_ATTEMPTS: "2",
      },
    },
  });
  mongo = await new MongoClient(infra.mongoUrl).connect();
  tools = mongo.db(`${stack.name}_tools`);
  runtime = mongo.db(`${stack.name}_runtime`);
});

afterAll(async () => {
  await stack?.stop();
  await tools?.dropDatabase();
  await runtime?.dropDatabase();
  await mongo?.close();
});

async function effectsUnder(key: string): Promise<number> {
  return tools.collection("effects").countDocuments({ idempotency_key: key });
}

/** The runtime's idempotency key of a chaos call with the default key template. */
const defaultKey = (tool: string, runId: string, callId: string): string => `${tool}:${runId}:${callId}`;

describe("output contract", () => {
  it("refuses a result that violates the output schema and never forwards it", async () => {
    const { callId, result } = await callTool(stack, "chaos_misbehave", { mode: "invalid_result" });
    expect(result).toMatchObject({ ok: false, error: { code: "INVALID_TOOL_RESULT" }, retryable: false });
    expect(result).not.toHaveProperty("data");
    expect(JSON.stringify(result)).not.toContain("extra");
    const evidence = await runtime.collection("execution_evidence").findOne({ _id: result!.evidence_ref as never });
    expect(evidence).toMatchObject({ call_id: callId, kind: "INVALID_TOOL_RESULT" });
  });

  it("refuses a result above the contract's size limit", async () => {
    const { result } = await callTool(stack, "chaos_misbehave", { mode: "too_large" });
    expect(result).toMatchObject({ ok: false, error: { code: "RESULT_TOO_LARGE" } });
    expect(JSON.stringify(result).length).toBeLessThan(1_024);
  });

  it("turns an exception into EXECUTION_ERROR without its message or stack, kept for operators under evidence_ref", async () => {
    const { result } = await callTool(stack, "chaos_misbehave", { mode: "throws" });
    expect(result).toMatchObject({ ok: false, error: { code: "EXECUTION_ERROR", message: "chaos_misbehave failed" } });
    for (const secret of ["hunter2", "postgres", "/srv/", "secret-module", "at "]) expect(JSON.stringify(result)).not.toContain(secret);
    const evidence = await runtime.collection("execution_evidence").findOne({ _id: result!.evidence_ref as never });
    expect(JSON.stringify(evidence?.detail)).toContain("hunter2");
    expect((evidence?.detail as { stack?: string }).stack).toContain("secret-module");
  });

  it("forwards a result the tool truncated explicitly, marked as truncated", async () => {
    const { result } = await callTool(stack, "chaos_misbehave", { mode: "truncated" });
    expect(result).toMatchObject({ ok: true, data: { text: "the first part" }, truncated: true });
  });
});

describe("timeouts of a side-effecting tool", () => {
  it("reports OUTCOME_UNKNOWN, never retries, and reconciles to applied when the effect happened", async () => {
    const { runId, callId, result } = await callTool(stack, "chaos_write", { n: 1, delay_ms: 3_000, effect: "before_delay" });
    expect(result).toMatchObject({ ok: false, error: { code: "OUTCOME_UNKNOWN" }, retryable: false });
    const operationId = result!.operation_id!;
    expect(operationId).toMatch(/^op_/);

    const events = await waitForCallEvents(stack, callId, (es) => ofType(es, "reconciled").length > 0 && es.some((e) => e.payload.state === "succeeded"), {
      description: "the reconciliation of the timed-out write",
    });
    expect(terminal(events).map((e) => e.type)).toEqual(["outcome_unknown"]);
    expect(ofType(events, "started")).toHaveLength(1);
    const reconciled = ofType(events, "reconciled")[0]!;
    expect(reconciled.payload.outcome).toBe("applied");
    // The status check returned the tool's answer as recorded with the effect, validated against the contract.
    const effect = await tools.collection("effects").findOne({ idempotency_key: defaultKey("chaos_write", runId, callId) });
    expect((reconciled.payload.result as { data: unknown }).data).toEqual(JSON.parse(effect!.data_json as string));
    expect(await effectsUnder(defaultKey("chaos_write", runId, callId))).toBe(1);

    // The model follows the reconciliation with the standard operation tool.
    const status = await callTool(stack, "get_operation", { operation_id: operationId });
    expect(status.result).toMatchObject({ ok: true, data: { operation_id: operationId, kind: "reconciliation", state: "succeeded", result: { ok: true } } });
  });

  it("reconciles to not_applied when the tool stopped before its effect", async () => {
    const { runId, callId, result } = await callTool(stack, "chaos_write", { n: 2, delay_ms: 3_000, effect: "after_delay" });
    expect(result).toMatchObject({ ok: false, error: { code: "OUTCOME_UNKNOWN" } });
    const events = await waitForCallEvents(stack, callId, (es) => ofType(es, "reconciled").length > 0, { description: "the reconciliation" });
    const reconciled = ofType(events, "reconciled")[0]!;
    expect(reconciled.payload.outcome).toBe("not_applied");
    expect(reconciled.payload.result).toMatchObject({ ok: false, error: { code: "TIMEOUT" }, retryable: true });
    expect(await effectsUnder(defaultKey("chaos_write", runId, callId))).toBe(0);
    expect(ofType(events, "started")).toHaveLength(1);
  });
});

describe("retries", () => {
  it("retries a retryable failure with backoff, honouring Retry-After, and the effect happens once", async () => {
    const { runId, callId, result } = await callTool(stack, "chaos_flaky", { n: 1, failures: 2, code: "UPSTREAM_UNAVAILABLE", retry_after_ms: 700 });
    expect(result).toMatchObject({ ok: true, data: { n: 1, attempts: 3 } });
    const events = await waitForCallEvents(stack, callId, (es) => terminal(es).length > 0);
    expect(eventTrail(events).filter((t) => !t.startsWith("proposed") && !t.startsWith("authorized") && !t.startsWith("result_attached"))).toEqual([
      "started:1",
      "retry_scheduled:1",
      "started:2",
      "retry_scheduled:2",
      "started:3",
      "completed:3",
    ]);
    for (const scheduled of ofType(events, "retry_scheduled")) {
      expect(scheduled.payload).toMatchObject({ code: "UPSTREAM_UNAVAILABLE" });
      expect(scheduled.payload.delay_ms).toBeGreaterThanOrEqual(700);
    }
    // The next attempt starts no sooner than Retry-After.
    const times = events.map((e) => ({ type: `${e.type}:${(e as { attempt?: number }).attempt}`, at: Date.parse(e.time) }));
    const at = (t: string): number => times.find((x) => x.type === t)!.at;
    expect(at("started:2") - at("retry_scheduled:1")).toBeGreaterThanOrEqual(700);
    expect(at("started:3") - at("retry_scheduled:2")).toBeGreaterThanOrEqual(700);
    expect(await effectsUnder(defaultKey("chaos_flaky", runId, callId))).toBe(1);
  });

  it("never retries a non-retryable failure", async () => {
    const { callId, result } = await callTool(stack, "chaos_flaky", { n: 2, failures: 1, code: "STATE_CONFLICT", retry_after_ms: 0 });
    expect(result).toMatchObject({ ok: false, error: { code: "STATE_CONFLICT" }, retryable: false });
    const events = await waitForCallEvents(stack, callId, (es) => terminal(es).length > 0);
    expect(ofType(events, "started")).toHaveLength(1);
    expect(ofType(events, "retry_scheduled")).toHaveLength(0);
  });

  it("stops at the contract's attempt budget and reports the last failure", async () => {
    const { runId, callId, result } = await callTool(stack, "chaos_flaky", { n: 3, failures: 8, code: "RATE_LIMITED", retry_after_ms: 0 });
    expect(result).toMatchObject({ ok: false, error: { code: "RATE_LIMITED" }, retryable: true });
    const events = await waitForCallEvents(stack, callId, (es) => terminal(es).length > 0);
    expect(ofType(events, "started")).toHaveLength(4);
    expect(ofType(events, "retry_scheduled")).toHaveLength(3);
    expect(terminal(events).map((e) => `${e.type}:${(e as { attempt?: number }).attempt}`)).toEqual(["completed:4"]);
    expect(await effectsUnder(defaultKey("chaos_flaky", runId, callId))).toBe(0);
  });

  it("does not wait longer than the policy allows: a Retry-After beyond max_delay ends the retries", async () => {
    const { callId, result } = await callTool(stack, "chaos_flaky", { n: 4, failures: 1, code: "UPSTREAM_UNAVAILABLE", retry_after_ms: 5_000 });
    expect(result).toMatchObject({ ok: false, error: { code: "UPSTREAM_UNAVAILABLE", details: { retry_after_ms: 5_000 } }, retryable: true });
    expect(ofType(await settledCallEvents(stack, callId), "retry_scheduled")).toHaveLength(0);
  });
});

describe("long-running operations", () => {
  it("answers accepted with an operation id, then tracks it to succeeded and publishes the completion", async () => {
    const { callId, result } = await callTool(stack, "chaos_job", { n: 7, duration_ms: 1_200 });
    expect(result).toMatchObject({ ok: true, data: { state: "accepted" } });
    const operationId = result!.operation_id!;
    expect((result!.data as { operation_id: string }).operation_id).toBe(operationId);

    const early = await callTool(stack, "get_operation", { operation_id: operationId });
    expect(["accepted", "running"]).toContain((early.result!.data as { state: string }).state);

    const events = await waitForCallEvents(stack, callId, (es) => es.some((e) => e.type === "operation_updated" && e.payload.state === "succeeded"), {
      description: "the job's completion event",
    });
    const states = ofType(events, "operation_updated").map((e) => e.payload.state);
    expect(states).toEqual(["accepted", "running", "succeeded"]);
    const completion = ofType(events, "operation_updated").at(-1)!;
    expect(completion.payload.result).toMatchObject({ ok: true, data: { n: 7, ran_ms: 1_200 }, operation_id: operationId });

    const done = await callTool(stack, "get_operation", { operation_id: operationId });
    expect(done.result).toMatchObject({ ok: true, data: { kind: "job", tool: "chaos_job", state: "succeeded", result: { ok: true, data: { n: 7 } } } });
    // A finished operation cannot be cancelled.
    const late = await callTool(stack, "cancel_operation", { operation_id: operationId });
    expect(late.result).toMatchObject({ ok: false, error: { code: "STATE_CONFLICT" } });
  });

  it("cancels a running operation for its owner only, once, and publishes the cancellation", async () => {
    const { callId, result } = await callTool(stack, "chaos_job", { n: 8, duration_ms: 60_000 });
    const operationId = result!.operation_id!;
    // Another principal sees no such operation, and cannot cancel it.
    const carol = await stack.jwt({ sub: "carol", roles: ["researcher"] });
    const foreign = await callTool(stack, "get_operation", { operation_id: operationId }, { credential: carol });
    expect(foreign.result).toMatchObject({ ok: false, error: { code: "OBJECT_NOT_FOUND" } });
    const foreignCancel = await callTool(stack, "cancel_operation", { operation_id: operationId }, { credential: carol });
    expect(foreignCancel.result).toMatchObject({ ok: false, error: { code: "OBJECT_NOT_FOUND" } });

    const cancelled = await callTool(stack, "cancel_operation", { operation_id: operationId });
    expect(cancelled.result).toMatchObject({ ok: true, data: { operation_id: operationId, state: "cancelled" } });
    const again = await callTool(stack, "cancel_operation", { operation_id: operationId });
    expect(again.result).toMatchObject({ ok: true, data: { state: "cancelled" } });

    const events = await waitForCallEvents(stack, callId, (es) => es.some((e) => e.type === "operation_updated" && e.payload.state === "cancelled"));
    expect(ofType(events, "operation_updated").filter((e) => e.payload.state === "cancelled")).toHaveLength(1);
    const status = await callTool(stack, "get_operation", { operation_id: operationId });
    expect(status.result).toMatchObject({ ok: true, data: { state: "cancelled" } });
    // The job itself was cancelled at its tool, not only in Toolgate's records.
    expect(await tools.collection("chaos_job_finals").countDocuments({ state: "cancelled" })).toBe(1);
  });
});

describe("a poison message", () => {
  it("ends after bounded deliveries with a terminal result and a dead-letter record", async () => {
    // chaos_crash kills whichever executor runs it; a watchdog restarts executors so the call keeps being delivered.
    const restarts: string[] = [];
    let watching = true;
    const watchdog = (async () => {
      while (watching) {
        for (const label of ["executor-1", "executor-2"]) {
          const alive = stack.processes.some((p) => p.name === label && !p.exited);
          if (!alive) {
            restarts.push(label);
            await stack.startService("executor", label);
          }
        }
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    })();
    try {
      const { callId } = await callTool(stack, "chaos_crash", { n: 1 }, { waitMs: 0 });
      const result = await resultOf(stack, callId, { timeoutMs: 60_000 });
      expect(result).toMatchObject({ ok: false, error: { code: "EXECUTION_ERROR" }, retryable: false });
      const events = await waitForCallEvents(stack, callId, (es) => ofType(es, "dead_lettered").length > 0 && terminal(es).length > 0);
      expect(terminal(events)).toHaveLength(1);
      expect(ofType(events, "dead_lettered")[0]!.payload.reason).toContain("poison");
      const letter = await runtime.collection("dead_letters").findOne({ _id: callId as never });
      // Two executors died running it; the third attempt was not run.
      expect(letter).toMatchObject({ call_id: callId, tool: "chaos_crash", attempt: 3 });
      expect(restarts.length).toBeGreaterThanOrEqual(2);
    } finally {
      watching = false;
      await watchdog;
    }
    // The restarted executors keep serving.
    const after = await callTool(stack, "chaos_misbehave", { mode: "ok" });
    expect(after.result).toMatchObject({ ok: true });
    await waitFor(() => stack.processes.filter((p) => !p.exited && p.name.startsWith("executor")).length === 2, { description: "two live executors" });
  });
});
