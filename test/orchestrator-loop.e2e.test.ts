import { Stack, testInfra, waitFor, type AuditedEvent } from "@toolgate/testkit";
import { MongoClient } from "mongodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// The tool loop of seed 001 §5 through the real services: scheduling, budgets and crash recovery.
const TASK = "task_loop";
const INPUT = `Research task task_id=${TASK}: state management.`;

let stack: Stack;
let mongo: MongoClient;

beforeAll(async () => {
  const infra = testInfra();
  stack = await Stack.start({
    natsUrl: infra.natsUrl,
    mongoUrl: infra.mongoUrl,
    // Searches for "parallel probe" or "unhurried" take 700 ms: long enough to see overlap, or to crash mid-call.
    policyFiles: {
      "approve-dave.cedar": `@id("test-dave-saves-need-approval")
forbid (principal == User::"acme/dave", action == Action::"call", resource == Tool::"save_evidence") when { !context.approved };
`,
    },
    env: {
      executor: { EXECUTOR_FAULTS: JSON.stringify({ slowSearch: { pattern: "parallel probe|unhurried", delayMs: 700 } }) },
      orchestrator: { ORCHESTRATOR_SWEEP_MS: "100" },
    },
  });
  mongo = await new MongoClient(infra.mongoUrl).connect();
});

afterAll(async () => {
  await stack?.stop();
  await mongo?.db(`${stack.name}_runtime`).dropDatabase();
  await mongo?.db(`${stack.name}_tools`).dropDatabase();
  await mongo?.close();
});

/** Execution interval (started → completed, by the services' own event times) of each call, by tool. */
function intervals(trace: AuditedEvent[], tool: string): { callId: string; start: number; end: number }[] {
  const byCall = new Map<string, { tool?: string; start?: number; end?: number }>();
  for (const { event } of trace) {
    if (event.kind !== "call") continue;
    const entry = byCall.get(event.call_id!) ?? {};
    if (event.type === "proposed") entry.tool = event.payload.tool_name as string;
    if (event.type === "started") entry.start = Date.parse(event.time);
    if (event.type === "completed") entry.end = Date.parse(event.time);
    byCall.set(event.call_id!, entry);
  }
  return [...byCall]
    .filter(([, e]) => e.tool === tool && e.start !== undefined && e.end !== undefined)
    .map(([callId, e]) => ({ callId, start: e.start!, end: e.end! }))
    .sort((a, b) => a.start - b.start);
}

describe("scheduling", () => {
  it("runs two independent searches of one response in parallel", async () => {
    const run = await stack.runToEnd("scripted:c04-parallel", INPUT, { task_id: TASK });
    expect(run.status).toBe("completed");
    const [a, b] = intervals(await stack.trace(run.run_id), "search_sources");
    // Each takes 700 ms; run one after another they could not overlap.
    const overlap = Math.min(a!.end, b!.end) - Math.max(a!.start, b!.start);
    expect(overlap).toBeGreaterThan(400);
  });

  it("runs two writes to one task one after another, in the model's order", async () => {
    const run = await stack.runToEnd("scripted:c04-two-writes", INPUT, { task_id: TASK });
    expect(run.status).toBe("completed");
    const saves = intervals(await stack.trace(run.run_id), "save_evidence");
    expect(saves).toHaveLength(2);
    expect(saves[1]!.start).toBeGreaterThanOrEqual(saves[0]!.end);
    const order = run.calls.filter((c) => c.tool === "save_evidence").map((c) => c.provider_call_id);
    expect(order).toEqual(["call_03", "call_04"]);
    expect(saves[0]!.callId).toBe(run.calls.find((c) => c.provider_call_id === "call_03")!.call_id);
  });

  it("never overlaps writes to the same task from concurrent runs on two orchestrator replicas", async () => {
    const second = await stack.startService("orchestrator", "orchestrator-2");
    try {
      // Runs 1 and 3 start on the first replica, run 2 on the second; both then take turns of any run.
      const urls = [stack.orchestratorUrl, `http://127.0.0.1:${second.httpPort}`];
      const runIds = await Promise.all(
        [0, 1, 2].map(async (i) => {
          const response = await fetch(`${urls[i % 2]}/v1/runs`, {
            method: "POST",
            headers: { authorization: `Bearer ${stack.apiKeys.alice}`, "content-type": "application/json" },
            body: JSON.stringify({ model: "scripted:c04-two-writes", input: INPUT, context: { task_id: TASK } }),
          });
          expect(response.status).toBe(202);
          return ((await response.json()) as { run_id: string }).run_id;
        }),
      );
      const runs = await Promise.all(
        runIds.map((runId) =>
          waitFor(
            async () => {
              const { body } = await stack.api<{ status: string }>("GET", `/v1/runs/${runId}?wait_ms=5000`);
              return body.status === "running" ? undefined : body;
            },
            { timeoutMs: 60_000, description: `run ${runId} finishing` },
          ),
        ),
      );
      expect(runs.every((r) => r.status === "completed")).toBe(true);
      const owners = await mongo
        .db(`${stack.name}_runtime`)
        .collection<{ owner: string }>("run_steps")
        .distinct("owner", { run_id: { $in: runIds }, kind: "claim" });
      expect(new Set(owners.map((o) => o.replace(/-[0-9a-f]{6}$/, "")))).toEqual(new Set(["orchestrator", "orchestrator-2"]));
      const saves = (await Promise.all(runIds.map(async (runId) => intervals(await stack.trace(runId), "save_evidence"))))
        .flat()
        .sort((a, b) => a.start - b.start);
      expect(saves).toHaveLength(6);
      for (let i = 1; i < saves.length; i++) expect(saves[i]!.start).toBeGreaterThanOrEqual(saves[i - 1]!.end);
    } finally {
      await second.stop();
    }
  });
});

describe("budgets stop a looping model, each with its own reason", () => {
  const cases = [
    { model: "scripted:loop-same", budgets: {}, reason: "repeated_call" },
    { model: "scripted:loop-varied", budgets: { max_turns: 3 }, reason: "budget_turns" },
    { model: "scripted:loop-varied", budgets: { max_tool_calls: 2 }, reason: "budget_tool_calls" },
    { model: "scripted:loop-varied", budgets: { max_tokens: 1_000 }, reason: "budget_tokens" },
    // The shortest wall clock allowed: the run's own budgets can only be tighter than the stack's (20 turns), and
    // at 400 ms fast turns (under 20 ms each) reached the turn limit first.
    { model: "scripted:loop-varied", budgets: { max_wall_clock_ms: 100 }, reason: "budget_wall_clock" },
  ] as const;

  for (const c of cases) {
    it(`${c.reason}`, async () => {
      const started = await stack.api<{ run_id: string }>("POST", "/v1/runs", { model: c.model, input: INPUT, context: { task_id: TASK }, budgets: c.budgets });
      expect(started.status).toBe(202);
      const run = await waitFor(
        async () => {
          const { body } = await stack.api<{ status: string; stop_reason?: string }>("GET", `/v1/runs/${started.body.run_id}?wait_ms=5000`);
          return body.status === "running" ? undefined : body;
        },
        { timeoutMs: 30_000, description: `the run stopping with ${c.reason}` },
      );
      expect(run).toMatchObject({ status: "stopped", stop_reason: c.reason });
      const trace = await stack.trace(started.body.run_id);
      const stopped = trace.find((e) => e.event.kind === "run" && e.event.type === "stopped");
      expect(stopped?.event.payload.reason).toBe(c.reason);
    });
  }

  it("approval_timeout", async () => {
    // dave's saves need a human (approve-dave.cedar); nobody approves, so the run stops on its approval budget.
    const dave = await stack.jwt({ sub: "dave", roles: ["researcher"] });
    const input = "Research task task_id=task_wait: state management.";
    const started = await stack.apiWith<{ run_id: string }>(dave, "POST", "/v1/runs", {
      model: "scripted:c04",
      input,
      context: { task_id: "task_wait" },
      budgets: { max_approval_wait_ms: 500 },
    });
    expect(started.status).toBe(202);
    const run = await waitFor(
      async () => {
        const { body } = await stack.apiWith<{ status: string; stop_reason?: string }>(dave, "GET", `/v1/runs/${started.body.run_id}?wait_ms=5000`);
        return body.status === "running" ? undefined : body;
      },
      { timeoutMs: 30_000, description: "the run stopping on its approval wait" },
    );
    expect(run).toMatchObject({ status: "stopped", stop_reason: "approval_timeout" });
    // The stop withdraws the waiting call's approval request: the call ends now, and never runs.
    const trail = await stack.trace(started.body.run_id);
    expect(trail.find((e) => e.event.kind === "run" && e.event.type === "stopped")?.event.payload.reason).toBe("approval_timeout");
    const save = trail.filter((e) => e.event.kind === "call" && e.event.tool?.name === "save_evidence").map((e) => e.event);
    expect(save.map((e) => e.type)).toEqual(["approval_requested", "denied", "result_attached"]);
    const denied = save[1]!;
    expect(denied.payload).toMatchObject({ result: { ok: false, error: { code: "BUDGET_EXCEEDED" } } });
    expect((denied.payload.reasons as string[])[0]).toMatch(/^approval apr_\w+ withdrawn: the run stopped \(approval_timeout\)/);
    const late = await stack.policyApi<{ error: { code: string } }>("POST", `/v1/approvals/${save[0]!.payload.approval_id as string}/approve`, {});
    expect([late.status, late.body.error.code]).toEqual([409, "ALREADY_DECIDED"]);
    expect(await mongo.db(`${stack.name}_tools`).collection("evidence").countDocuments({ task_id: "task_wait" })).toBe(0);
  });
});

describe("cancelling a run", () => {
  it("stops it for its owner only, withdraws the call waiting for approval, and refuses a second cancel", async () => {
    const dave = await stack.jwt({ sub: "dave", roles: ["researcher"] });
    const input = "Research task task_id=task_cancel: state management.";
    const started = await stack.apiWith<{ run_id: string }>(dave, "POST", "/v1/runs", { model: "scripted:c04", input, context: { task_id: "task_cancel" } });
    const runId = started.body.run_id;
    await waitFor(
      async () => {
        const { body } = await stack.audit<{ events: AuditedEvent[] }>(`/v1/runs/${runId}/events`);
        return body.events.some((e) => e.event.type === "approval_requested");
      },
      { description: "save_evidence waiting for approval" },
    );
    // Another principal cannot tell the run exists.
    expect((await stack.api("POST", `/v1/runs/${runId}/cancel`, {})).status).toBe(404);

    const cancelled = await stack.apiWith<{ status: string; stop_reason: string; final_text: string }>(dave, "POST", `/v1/runs/${runId}/cancel`, {});
    expect(cancelled.status).toBe(200);
    expect(cancelled.body).toMatchObject({ status: "stopped", stop_reason: "cancelled", final_text: "cancelled by acme/dave" });
    const trail = await stack.trace(runId);
    expect(trail.find((e) => e.event.kind === "run" && e.event.type === "stopped")?.event.payload.reason).toBe("cancelled");
    const save = trail.filter((e) => e.event.kind === "call" && e.event.tool?.name === "save_evidence").map((e) => e.event);
    expect(save.map((e) => e.type)).toEqual(["approval_requested", "denied", "result_attached"]);
    expect(save[1]!.payload).toMatchObject({ result: { ok: false, error: { code: "APPROVAL_DENIED" } } });
    expect(await mongo.db(`${stack.name}_tools`).collection("evidence").countDocuments({ task_id: "task_cancel" })).toBe(0);

    const again = await stack.apiWith<{ error: { code: string } }>(dave, "POST", `/v1/runs/${runId}/cancel`, {});
    expect([again.status, again.body.error.code]).toEqual([409, "RUN_ENDED"]);
  });
});

describe("crash recovery", () => {
  it("finishes a run after the orchestrator is killed mid-run, without re-running completed calls", async () => {
    const input = "Research task task_id=task_crash: state management.";
    const started = await stack.api<{ run_id: string }>("POST", "/v1/runs", { model: "scripted:c04-slow", input, context: { task_id: "task_crash" } });
    const runId = started.body.run_id;
    // Kill while the first (slow) search is executing.
    await waitFor(
      async () => {
        const { body } = await stack.audit<{ events: AuditedEvent[] }>(`/v1/runs/${runId}/events`);
        return body.events.some((e) => e.event.type === "started" && e.event.kind === "call");
      },
      { description: "the first call starting" },
    );
    await stack.process("orchestrator").kill();
    await stack.startService("orchestrator");

    const run = await waitFor(
      async () => {
        const { body } = await stack.api<{ status: string; calls: { tool: string; status: string; result?: { ok: boolean } }[] }>(
          "GET",
          `/v1/runs/${runId}?wait_ms=5000`,
        );
        return body.status === "running" ? undefined : body;
      },
      { timeoutMs: 60_000, description: "the run finishing after the restart" },
    );
    expect(run.status).toBe("completed");
    expect(run.calls.map((c) => [c.tool, c.result?.ok])).toEqual([
      ["search_sources", true],
      ["fetch_document", true],
      ["save_evidence", true],
    ]);
    // Audit stores a run's events on several slots at once: the run's end can be on the record a moment before
    // the last turn's model_responded, so the trail is read once it holds all four turns (or the wait fails).
    const trace = await waitFor(
      async () => {
        const events = await stack.trace(runId);
        return events.filter((e) => e.event.kind === "run" && e.event.type === "model_responded").length >= 4 ? events : undefined;
      },
      { timeoutMs: 10_000, description: "every turn of the run on the audit record" },
    ).catch(async () => stack.trace(runId));
    // Each call was executed exactly once, and the model was asked once per turn.
    const startedPerCall = new Map<string, number>();
    for (const { event } of trace)
      if (event.type === "started" && event.kind === "call") startedPerCall.set(event.call_id!, (startedPerCall.get(event.call_id!) ?? 0) + 1);
    expect([...startedPerCall.values()]).toEqual([1, 1, 1]);
    expect(trace.filter((e) => e.event.kind === "run" && e.event.type === "model_responded")).toHaveLength(4);
    const evidence = await mongo.db(`${stack.name}_tools`).collection("evidence").countDocuments({ task_id: "task_crash" });
    expect(evidence).toBe(1);
  });
});

describe("crash recovery while a call waits for a human", () => {
  it("resumes a run waiting for an approval after the orchestrator is killed, and the approved call runs once", async () => {
    const dave = await stack.jwt({ sub: "dave", roles: ["researcher"] });
    const input = "Research task task_id=task_resume: state management.";
    const started = await stack.apiWith<{ run_id: string }>(dave, "POST", "/v1/runs", { model: "scripted:c04", input, context: { task_id: "task_resume" } });
    expect(started.status).toBe(202);
    const runId = started.body.run_id;
    const requested = await waitFor(
      async () => {
        const { body } = await stack.audit<{ events: AuditedEvent[] }>(`/v1/runs/${runId}/events`);
        return body.events.find((e) => e.event.kind === "call" && e.event.type === "approval_requested");
      },
      { description: "save_evidence waiting for approval" },
    );

    await stack.process("orchestrator").kill();
    await stack.startService("orchestrator");

    const listed = await stack.policyApi<{ approvals: { approval_id: string; plan_hash: string }[] }>(
      "GET",
      `/v1/approvals?call_id=${requested.event.call_id}`,
    );
    const approval = listed.body.approvals[0]!;
    const approved = await stack.policyApi<{ approval: { state: string } }>("POST", `/v1/approvals/${approval.approval_id}/approve`, {
      plan_hash: approval.plan_hash,
      reason: "checked after the restart",
    });
    expect([approved.status, approved.body.approval.state]).toEqual([200, "approved"]);

    const run = await waitFor(
      async () => {
        const { body } = await stack.apiWith<{ status: string; calls: { tool: string; result?: { ok: boolean } }[] }>(
          dave,
          "GET",
          `/v1/runs/${runId}?wait_ms=5000`,
        );
        return body.status === "running" ? undefined : body;
      },
      { timeoutMs: 60_000, description: "the run finishing after the approval" },
    );
    expect(run.status).toBe("completed");
    expect(run.calls.map((c) => [c.tool, c.result?.ok])).toEqual([
      ["search_sources", true],
      ["fetch_document", true],
      ["save_evidence", true],
    ]);
    const trace = await stack.trace(runId);
    const starts = trace.filter((e) => e.event.kind === "call" && e.event.type === "started").map((e) => e.event.call_id);
    expect(starts).toHaveLength(3);
    expect(new Set(starts).size).toBe(3);
  });
});
