import { callTool, eventTrail, resultOf, Stack, testInfra, waitForCallEvents, type AuditedEvent } from "@toolgate/testkit";
import { MongoClient, type Db } from "mongodb";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";

// Every attempt that may have an effect is on the record before it runs, and a write whose outcome an error
// leaves open is reported unknown and reconciled — through the real services, with executors killed inside the
// tool (chaos_fault_write kills the process that runs it, or fails with a reset connection).

let stack: Stack;
let mongo: MongoClient;
let tools: Db;
let runtime: Db;

type Event = AuditedEvent["event"];
const ofType = (events: Event[], type: string): Event[] => events.filter((e) => e.type === type);
const terminal = (events: Event[]): Event[] => events.filter((e) => ["completed", "outcome_unknown", "rejected", "denied"].includes(e.type));
const reconciled = (events: Event[]): boolean => ofType(events, "reconciled").length > 0;
/** The attempts of a call and how they ended (the reconciliation's own operation updates left out). */
const executorTrail = (events: Event[]): string[] =>
  eventTrail(events.filter((e) => !["proposed", "authorized", "result_attached", "operation_updated"].includes(e.type)));
const EXECUTORS = ["executor-1", "executor-2"];

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
      },
    },
  });
  mongo = await new MongoClient(infra.mongoUrl).connect();
  tools = mongo.db(`${stack.name}_tools`);
  runtime = mongo.db(`${stack.name}_runtime`);
});

// A test that killed an executor brings it back, so each test starts with two.
afterEach(async () => {
  for (const label of EXECUTORS) {
    if (!stack.processes.some((p) => p.name === label && !p.exited)) await stack.startService("executor", label);
  }
});

afterAll(async () => {
  await stack?.stop();
  await tools?.dropDatabase();
  await runtime?.dropDatabase();
  await mongo?.close();
});

const keyOf = (runId: string, callId: string): string => `chaos_fault_write:${runId}:${callId}`;
const effectsUnder = (key: string): Promise<number> => tools.collection("effects").countDocuments({ idempotency_key: key });
/** The process that logged as `instance`: executor ids are the services' instance ids. */
const processOf = (instance: string) => stack.processes.find((p) => p.logs().some((line) => line.instance === instance));

describe("an executor killed inside a write", () => {
  it("leaves the started event of its attempt, with its id, though it died before the write could do anything", async () => {
    const { runId, callId } = await callTool(stack, "chaos_fault_write", { n: 1, fault: "crash_before_effect" }, { waitMs: 0 });
    const result = await resultOf(stack, callId, { timeoutMs: 60_000 });
    // The executor that took the call over cannot know that nothing happened: it reconciles, never repeats.
    expect(result).toMatchObject({ ok: false, error: { code: "OUTCOME_UNKNOWN" }, retryable: false });
    const events = await waitForCallEvents(stack, callId, reconciled, { timeoutMs: 30_000, description: "the reconciliation of the killed attempt" });

    expect(executorTrail(events)).toEqual(["started:1", "outcome_unknown:2", "reconciled:2"]);
    const started = ofType(events, "started")[0]!;
    const killed = processOf(started.payload.executor_id as string);
    expect(killed?.exited).toBe(true);
    expect(started.payload.idempotency_key_hash).toEqual(expect.any(String));
    // The takeover was made by the other executor, which is alive.
    expect(ofType(events, "reconciled")[0]!.payload.outcome).toBe("not_applied");
    expect(await effectsUnder(keyOf(runId, callId))).toBe(0);
  });

  it("leaves its started event when it died after the effect, and reconciliation finds the effect: applied once", async () => {
    const { runId, callId } = await callTool(stack, "chaos_fault_write", { n: 2, fault: "crash_after_effect" }, { waitMs: 0 });
    const result = await resultOf(stack, callId, { timeoutMs: 60_000 });
    expect(result).toMatchObject({ ok: false, error: { code: "OUTCOME_UNKNOWN" } });
    const events = await waitForCallEvents(stack, callId, reconciled, { timeoutMs: 30_000, description: "the reconciliation of the killed attempt" });

    expect(executorTrail(events)).toEqual(["started:1", "outcome_unknown:2", "reconciled:2"]);
    const started = ofType(events, "started")[0]!;
    expect(processOf(started.payload.executor_id as string)?.exited).toBe(true);
    const effect = await tools.collection("effects").findOne({ idempotency_key: keyOf(runId, callId) });
    // The effect was recorded by the executor that started attempt 1, and by no other.
    expect(effect?.executor).toBe(started.payload.executor_id);
    expect(await effectsUnder(keyOf(runId, callId))).toBe(1);
    const done = ofType(events, "reconciled")[0]!;
    expect(done.payload.outcome).toBe("applied");
    expect((done.payload.result as { data: unknown }).data).toEqual(JSON.parse(effect!.data_json as string));
  });
});

describe("a write whose connection was reset", () => {
  it("ends OUTCOME_UNKNOWN and is reconciled to applied when the write had landed, never EXECUTION_ERROR", async () => {
    const { runId, callId, result } = await callTool(stack, "chaos_fault_write", { n: 3, fault: "reset_after_effect" });
    expect(result).toMatchObject({ ok: false, error: { code: "OUTCOME_UNKNOWN" }, retryable: false });
    expect(result!.operation_id).toMatch(/^op_/);
    // What the model sees names no internals; operators find the reset under evidence_ref.
    expect(JSON.stringify(result)).not.toContain("ECONNRESET");
    const evidence = await runtime.collection("execution_evidence").findOne({ _id: result!.evidence_ref as never });
    expect(evidence).toMatchObject({ call_id: callId, kind: "exception", detail: { code: "ECONNRESET" } });

    const events = await waitForCallEvents(stack, callId, reconciled, { description: "the reconciliation of the reset write" });
    expect(executorTrail(events)).toEqual(["started:1", "outcome_unknown:1", "reconciled:1"]);
    expect(terminal(events).map((e) => e.type)).toEqual(["outcome_unknown"]);
    expect(ofType(events, "reconciled")[0]!.payload.outcome).toBe("applied");
    expect(await effectsUnder(keyOf(runId, callId))).toBe(1);
  });

  it("is reconciled to not_applied when the reset came before the write landed, and is not repeated", async () => {
    const { runId, callId, result } = await callTool(stack, "chaos_fault_write", { n: 4, fault: "reset_before_effect" });
    expect(result).toMatchObject({ ok: false, error: { code: "OUTCOME_UNKNOWN" } });
    const events = await waitForCallEvents(stack, callId, reconciled, { description: "the reconciliation of the reset write" });
    expect(executorTrail(events)).toEqual(["started:1", "outcome_unknown:1", "reconciled:1"]);
    expect(ofType(events, "reconciled")[0]!.payload.outcome).toBe("not_applied");
    expect(await effectsUnder(keyOf(runId, callId))).toBe(0);
  });

  it("stays a definite EXECUTION_ERROR when the tool's error says nothing was applied: no reconciliation", async () => {
    const { callId, result } = await callTool(stack, "chaos_fault_write", { n: 5, fault: "refused_before_effect" });
    expect(result).toMatchObject({ ok: false, error: { code: "EXECUTION_ERROR" }, retryable: false });
    expect(result).not.toHaveProperty("operation_id");
    const events = await waitForCallEvents(stack, callId, (es) => es.some((e) => e.type === "result_attached"));
    expect(executorTrail(events)).toEqual(["started:1", "completed:1"]);
    expect(ofType(events, "reconciled")).toEqual([]);
  });
});
