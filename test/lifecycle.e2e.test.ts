import { Stack, testInfra, waitFor, type AuditedEvent } from "@toolgate/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";

// Each service stops gracefully on SIGTERM: in-flight work finishes, connections drain, exit code 0.
let stack: Stack;

beforeAll(async () => {
  const infra = testInfra();
  stack = await Stack.start({
    natsUrl: infra.natsUrl,
    mongoUrl: infra.mongoUrl,
    env: { executor: { EXECUTOR_FAULTS: JSON.stringify({ slowSearch: { pattern: "unhurried", delayMs: 1_500 } }) } },
  });
});

afterAll(async () => {
  await stack?.stop();
});

it("lets a call in flight finish when the executor is told to stop, and exits cleanly", async () => {
  const input = "Research task task_id=task_life: state management.";
  const started = await stack.api<{ run_id: string }>("POST", "/v1/runs", { model: "scripted:c04-slow", input, context: { task_id: "task_life" } });
  const runId = started.body.run_id;
  const events = async () => (await stack.audit<{ events: AuditedEvent[] }>(`/v1/runs/${runId}/events`)).body.events;
  const first = await waitFor(async () => (await events()).find((e) => e.event.kind === "call" && e.event.type === "started"), {
    description: "the slow search starting",
  });

  const code = await stack.process("executor-1").stop();
  expect(code).toBe(0);
  // The search it was running ended with its real result before the process exited: no other executor
  // is running yet, so a completion can only have come from the one that stopped. The audit ingests
  // asynchronously, so wait for it to have read that far.
  const completed = await waitFor(async () => (await events()).find((e) => e.event.type === "completed" && e.event.call_id === first.event.call_id), {
    description: "the stopped executor's completion reaching the audit",
  });
  expect(completed.event.payload.result).toMatchObject({ ok: true });

  // Another executor picks up the rest of the run.
  await stack.startService("executor", "executor-2");
  const run = await waitFor(
    async () => {
      const { body } = await stack.api<{ status: string }>("GET", `/v1/runs/${runId}?wait_ms=5000`);
      return body.status === "running" ? undefined : body;
    },
    { timeoutMs: 30_000, description: "the run finishing on the new executor" },
  );
  expect(run.status).toBe("completed");
});

it("stops every service with exit code 0 on SIGTERM", async () => {
  const codes: Record<string, number | null> = {};
  for (const name of ["orchestrator", "policy", "executor-2", "audit"]) codes[name] = await stack.process(name).stop();
  expect(codes).toEqual({ orchestrator: 0, policy: 0, "executor-2": 0, audit: 0 });
});
