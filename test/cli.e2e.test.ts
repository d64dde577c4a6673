import { execFile, spawn } from "node:child_process";
import { promisify } from "node:util";
import { createServer } from "node:net";
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
    expect(await toolgate("audit", runId, "--verify")).toContain("hash chain verified");
    expect(await toolgate("audit", runId)).toMatch(/call\.completed\s+call_\S+\s+save_evidence ok/);
    // A finished run cannot be cancelled: the refusal says why, without a stack trace.
    const cancel = await run(process.execPath, [CLI, "runs", "cancel", runId], { env }).catch((e: { stderr: string; code: number }) => e);
    expect(cancel).toMatchObject({ code: 1 });
    expect((cancel as { stderr: string }).stderr.trim()).toBe("toolgate: RUN_ENDED: the run already ended (completed)");
  });

  it("honours --task when the input does not name the task: the README's run saves its evidence", async () => {
    // The README's command: the model reads only the input, so the task must reach it there too, or its
    // save_evidence names another task and policy denies it (PERMISSION_DENIED).
    const out = await toolgate("runs", "start", "--model", "scripted:c04", "--input", "research agent state management", "--task", "task_readme", "--wait");
    expect(out).toMatch(/^run_\S+\s+completed/);
    expect(out).toMatch(/save_evidence\s+completed ok/);
    const runId = out.split(/\s/)[0]!;
    const started = (await stack.trace(runId)).find((e) => e.event.kind === "run" && e.event.type === "started");
    expect(started?.event.payload).toMatchObject({ context: { task_id: "task_readme" } });
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

  /** Starts `toolgate tail` with `args`; `output()` is what it printed so far. */
  const startTail = (args: string[], extraEnv: Record<string, string> = {}) => {
    const child = spawn(process.execPath, [CLI, "tail", ...args], { env: { ...env, ...extraEnv } });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    return { child, stdout: () => stdout, stderr: () => stderr };
  };

  /** A run that has ended, and its one call (which ended before any tail was started). */
  const endedCall = async () => {
    const started = await stack.api<{ run_id: string }>("POST", "/v1/runs", { model: "scripted:c04-no-match", input: "q", context: { task_id: "t" } });
    const events = await stack.trace(started.body.run_id);
    const callId = events.find((e) => e.event.kind === "call")!.event as { call_id: string };
    return { runId: started.body.run_id, callId: callId.call_id };
  };

  it("tail --call replays the history of a call that has ended, in order, and only that call's", async () => {
    const { callId } = await endedCall();
    const other = await endedCall();
    const tail = startTail(["--call", callId]);
    try {
      await waitFor(() => tail.stdout().includes("call.result_attached") || undefined, { description: "the tail replaying the ended call" });
      const types = tail
        .stdout()
        .trimEnd()
        .split("\n")
        .map((l) => /\s(call\.\w+)\s/.exec(l)?.[1]);
      expect(types).toEqual(["call.proposed", "call.authorized", "call.started", "call.completed", "call.result_attached"]);
      expect(tail.stdout()).toMatch(/call\.completed\s+call_\S+\s+search_sources ok/);
      expect(tail.stdout()).not.toContain(other.callId);
      expect(tail.stderr()).toContain(`following ${stack.name}.call.${callId}.* from its first event`);
    } finally {
      tail.child.kill("SIGINT");
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

  describe("for people", () => {
    /** Runs the CLI with `overrides` to its environment (undefined removes a variable); never throws. */
    const attempt = async (args: string[], overrides: Record<string, string | undefined> = {}) => {
      const childEnv = Object.fromEntries(Object.entries({ ...env, ...overrides }).filter(([, v]) => v !== undefined)) as Record<string, string>;
      return run(process.execPath, [CLI, ...args], { env: childEnv }).then(
        (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
        (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }),
      );
    };
    /** A failure is one line on stderr, never a stack trace. */
    const oneLine = (stderr: string) => {
      const lines = stderr.trimEnd().split("\n");
      expect(lines, stderr).toHaveLength(1);
      expect(stderr).not.toMatch(/\bat .+:\d+:\d+/);
      return lines[0]!;
    };

    it("prints help for the CLI, a group and each command", async () => {
      const all = await attempt(["--help"]);
      expect(all).toMatchObject({ code: 0, stderr: "" });
      for (const command of ["runs start", "runs get <run_id>", "calls get <call_id>", "tools", "approvals deny <approval_id>", "audit", "tail"]) {
        expect(all.stdout).toContain(`toolgate ${command}`);
      }
      const start = await attempt(["runs", "start", "--help"]);
      expect(start.code).toBe(0);
      expect(start.stdout).toMatch(/^usage: toolgate runs start --model <model>/);
      for (const text of ["--input <text>", "--task <task_id>", "--wait", "TOOLGATE_URL", "TOOLGATE_API_KEY"]) expect(start.stdout).toContain(text);
      expect((await attempt(["tail", "-h"])).stdout).toContain("--call <call_id>");
      expect((await attempt(["approvals", "--help"])).stdout).toContain("toolgate approvals approve <approval_id>");
    });

    it("names an unknown or misused option, a missing argument and an unknown command, exit 2", async () => {
      const cases: [string[], string][] = [
        [["runs", "start", "--modle", "x"], "toolgate: runs start: unknown option --modle (see toolgate runs start --help)"],
        [["runs", "start", "--model", "scripted:c04", "--wait=false"], "toolgate: runs start: --wait takes no value"],
        [["runs", "start"], "toolgate: runs start: --model is required (see toolgate runs start --help)"],
        [["runs", "get"], "toolgate: runs get: missing <run_id> (see toolgate runs get --help)"],
        [["tools", "--format"], "toolgate: tools: --format needs a value"],
        [["runz"], 'toolgate: unknown command "runz" (see toolgate --help)'],
      ];
      for (const [args, message] of cases) {
        const result = await attempt(args);
        expect(result.code, args.join(" ")).toBe(2);
        expect(oneLine(result.stderr)).toBe(message);
      }
    });

    it("names a missing variable, exit 2", async () => {
      const noKey = await attempt(["tools"], { TOOLGATE_API_KEY: undefined });
      expect(noKey.code).toBe(2);
      expect(oneLine(noKey.stderr)).toBe("toolgate: TOOLGATE_API_KEY is not set (the API key the orchestrator knows you by)");
      const noUrl = await attempt(["runs", "get", "run_01M8KHXH7NQ308R8J60HB476AB"], { TOOLGATE_URL: undefined });
      expect(noUrl.code).toBe(2);
      expect(oneLine(noUrl.stderr)).toBe("toolgate: TOOLGATE_URL is not set (the URL of the orchestrator)");
      const noPolicy = await attempt(["approvals", "list"], { TOOLGATE_APPROVER_TOKEN: "x", TOOLGATE_POLICY_URL: undefined });
      expect(oneLine(noPolicy.stderr)).toBe("toolgate: TOOLGATE_POLICY_URL is not set (the URL of the policy service)");
    });

    it("says so in one line when TOOLGATE_URL points at another service or at nothing", async () => {
      const audit = await attempt(["runs", "get", "run_01M8KHXH7NQ308R8J60HB476AB"], { TOOLGATE_URL: stack.auditUrl });
      expect(audit.code).toBe(1);
      const line = oneLine(audit.stderr);
      expect(line).toContain(`${stack.auditUrl} did not answer as the Toolgate orchestrator`);
      expect(line).toContain("check TOOLGATE_URL");
      expect(line).not.toContain("undefined");
      const tools = await attempt(["tools"], { TOOLGATE_URL: stack.policyUrl });
      expect(oneLine(tools.stderr)).toContain("did not answer as the Toolgate orchestrator");
      const nothing = await attempt(["tools"], { TOOLGATE_URL: `http://${await closedAddress()}` });
      expect(nothing.code).toBe(1);
      expect(oneLine(nothing.stderr)).toMatch(/^toolgate: cannot reach the orchestrator at http:\/\/127\.0\.0\.254:\d+ \(TOOLGATE_URL\): ECONNREFUSED$/);
    });

    it("names a bad --task, --call or subject prefix, and a stream that is not there", async () => {
      const task = await attempt(["runs", "start", "--model", "scripted:c04", "--task", "task c04"]);
      expect(task.code).toBe(2);
      expect(oneLine(task.stderr)).toBe("toolgate: runs start: --task must be a task id (up to 128 letters, digits, _ and -)");
      const call = await attempt(["tail", "--call", "call.*"]);
      expect(call.code).toBe(2);
      expect(oneLine(call.stderr)).toBe("toolgate: tail: --call must be a call id (call_<ULID>)");
      const prefix = await attempt(["tail"], { TOOLGATE_SUBJECT_PREFIX: "Not A Prefix" });
      expect(prefix.code).toBe(2);
      expect(oneLine(prefix.stderr)).toBe('toolgate: TOOLGATE_SUBJECT_PREFIX "Not A Prefix" is not a subject prefix');
      const missing = await attempt(["tail", "--call", "call_01M8KHXH7NQ308R8J60HB476AB"], { TOOLGATE_SUBJECT_PREFIX: "no-such-stack" });
      expect(missing.code).toBe(1);
      expect(oneLine(missing.stderr)).toBe("toolgate: NATS has no stream NO_SUCH_STACK_EVENTS; check TOOLGATE_SUBJECT_PREFIX");
    });

    it("says so in one line when tail cannot reach NATS", async () => {
      const url = `nats://${await closedAddress()}`;
      const result = await attempt(["tail"], { NATS_URL: url });
      expect(result.code).toBe(1);
      expect(oneLine(result.stderr)).toMatch(new RegExp(`^toolgate: cannot reach NATS at ${url.replace(/\./g, "\\.")} \\(NATS_URL\\): `));
    });
  });
});

/**
 * An address nothing listens on and nothing in this suite can start listening on while a test uses it: every
 * server the tests start binds 127.0.0.1, so a port free on 127.0.0.254 stays refused (a port free on 127.0.0.1
 * can be taken by another test file's server between the check and the CLI's connect).
 */
function closedAddress(): Promise<string> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.254", () => {
      const address = server.address();
      server.close(() => (typeof address === "object" && address ? resolve(`127.0.0.254:${address.port}`) : reject(new Error("no port"))));
    });
  });
}
