import { execFile, spawn } from "node:child_process";
import { promisify } from "node:util";
import { REPO_ROOT, Stack, testInfra, waitFor } from "@toolgate/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const CLI = `${REPO_ROOT}packages/cli/dist/cli.js`;

let stack: Stack;
let env: Record<string, string>;

beforeAll(async () => {
  const infra = testInfra();
  stack = await Stack.start({ natsUrl: infra.natsUrl, mongoUrl: infra.mongoUrl });
  env = {
    PATH: process.env.PATH ?? "",
    TOOLGATE_URL: stack.orchestratorUrl,
    TOOLGATE_API_KEY: stack.apiKeys.alice,
    TOOLGATE_AUDIT_URL: stack.auditUrl,
    NATS_URL: infra.natsUrl,
    TOOLGATE_SUBJECT_PREFIX: stack.name,
  };
});

afterAll(async () => {
  await stack?.stop();
});

const toolgate = async (...args: string[]) => (await run(process.execPath, [CLI, ...args], { env })).stdout;

describe("toolgate CLI", () => {
  it("starts a run, waits for it, and verifies its audit trail", async () => {
    const out = await toolgate("runs", "start", "--model", "scripted:c04", "--input", "task_id=task_cli: research", "--task", "task_cli", "--wait");
    expect(out).toMatch(/^run_\S+\s+completed/);
    expect(out).toMatch(/search_sources\s+completed ok/);
    expect(out).toMatch(/save_evidence\s+completed ok/);
    const runId = out.split(/\s/)[0]!;
    await stack.trace(runId);
    expect(await toolgate("audit", runId, "--verify")).toContain("hash chain and signatures verified");
    expect(await toolgate("audit", runId)).toMatch(/call\.completed\s+call_\S+\s+save_evidence ok/);
    // A finished run cannot be cancelled: the refusal says why, without a stack trace.
    const cancel = await run(process.execPath, [CLI, "runs", "cancel", runId], { env }).catch((e: { stderr: string; code: number }) => e);
    expect(cancel).toMatchObject({ code: 1 });
    expect((cancel as { stderr: string }).stderr.trim()).toBe("toolgate: RUN_ENDED: the run already ended (completed)");
  });

  it("lists the tools and explains a failure without a stack trace", async () => {
    expect(await toolgate("tools")).toMatch(/^search_sources@1\.0\.0 /m);
    const failed = await run(process.execPath, [CLI, "runs", "get", "run_01M8KHXH7NQ308R8J60HB476AB"], { env }).catch(
      (e: { stderr: string; code: number }) => e,
    );
    expect(failed).toMatchObject({ code: 1 });
    expect((failed as { stderr: string }).stderr.trim()).toBe("toolgate: RUN_NOT_FOUND: no such run");
  });

  it("tails events live", async () => {
    const tail = spawn(process.execPath, [CLI, "tail"], { env });
    let output = "";
    let ready = "";
    tail.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    tail.stderr.on("data", (chunk: Buffer) => (ready += chunk.toString()));
    try {
      // The tail announces its subscription on stderr; only then is the run started.
      await waitFor(() => ready.includes("following"), { description: "the tail subscribing" });
      const started = await stack.api<{ run_id: string }>("POST", "/v1/runs", { model: "scripted:c04-no-match", input: "q", context: { task_id: "t" } });
      await waitFor(() => output.includes(`run.completed`) || undefined, { description: "the tail showing the run completing" });
      expect(output).toContain(started.body.run_id);
      expect(output).toMatch(/call\.completed\s+call_\S+\s+search_sources ok/);
    } finally {
      tail.kill("SIGINT");
    }
  });

  it("serves its OpenAPI document", async () => {
    const response = await fetch(`${stack.orchestratorUrl}/openapi.json`);
    const doc = (await response.json()) as { openapi: string; paths: Record<string, unknown> };
    expect(doc.openapi).toBe("3.1.0");
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining(["/v1/runs", "/v1/runs/{run_id}", "/v1/runs/{run_id}/cancel", "/v1/tool-calls", "/v1/tools"]),
    );
  });
});
