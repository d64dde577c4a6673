import { execFile, spawn } from "node:child_process";
import { promisify } from "node:util";
import { REPO_ROOT, Stack, testInfra, waitFor } from "@toolgate/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// The CLI in front of a human approval: under the Rule of Two a C04 run's save_evidence (after reading a
// document) waits for an approver. The requester sees that it waits for an approval, not just "pending".
const CLI = `${REPO_ROOT}packages/cli/dist/cli.js`;
const run = promisify(execFile);

let stack: Stack;
let env: Record<string, string>;

beforeAll(async () => {
  const infra = testInfra();
  stack = await Stack.start({ natsUrl: infra.natsUrl, mongoUrl: infra.mongoUrl, ruleOfTwo: true });
  env = {
    PATH: process.env.PATH ?? "",
    TOOLGATE_URL: stack.orchestratorUrl,
    TOOLGATE_API_KEY: stack.apiKeys.alice,
    NATS_URL: infra.natsUrl,
    TOOLGATE_SUBJECT_PREFIX: stack.name,
  };
});

afterAll(async () => {
  await stack?.stop();
});

const toolgate = async (args: string[], extraEnv: Record<string, string> = {}) =>
  (await run(process.execPath, [CLI, ...args], { env: { ...env, ...extraEnv } })).stdout;

describe("toolgate CLI and approvals", () => {
  it("shows a call waiting for an approval as such, while waiting, in runs get, calls get and tail, until it is approved", async () => {
    const waiting = spawn(process.execPath, [CLI, "runs", "start", "--model", "scripted:c04", "--input", "research", "--task", "task_apr", "--wait"], {
      env,
    });
    let stdout = "";
    let stderr = "";
    waiting.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    waiting.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => waiting.on("exit", resolve));
    const tails: ReturnType<typeof spawn>[] = [];
    try {
      // `runs start --wait` says, on stderr, which call the run waits on.
      const notice = await waitFor(
        () => /(run_\S+): (call_\S+) \(save_evidence\) is waiting for an approval \(toolgate approvals list\)/.exec(stderr) ?? undefined,
        {
          description: "runs start --wait saying the write waits for an approval",
          timeoutMs: 30_000,
        },
      );
      const [, runId, callId] = notice as unknown as [string, string, string];
      expect(stderr).toContain(`started ${runId}; waiting for it to end`);

      const shown = await toolgate(["runs", "get", runId]);
      expect(shown).toMatch(/^run_\S+\s+running/);
      expect(shown).toMatch(/fetch_document\s+completed ok/);
      expect(shown).toContain(`${callId}  save_evidence    pending (awaiting approval: see toolgate approvals list)`);
      expect((await toolgate(["calls", "get", callId])).split("\n")[0]).toBe(
        `${callId}  save_evidence  pending (awaiting approval: see toolgate approvals list)`,
      );
      // --json stays the orchestrator's own answer.
      expect(JSON.parse(await toolgate(["calls", "get", callId, "--json"]))).toMatchObject({ call_id: callId, status: "pending" });

      // The approver finds it, and a tail of the call replays its request.
      const approver = { TOOLGATE_POLICY_URL: stack.policyUrl, TOOLGATE_APPROVER_TOKEN: stack.apiKeys.carol };
      const listed = await toolgate(["approvals", "list"], approver);
      const approvalId = new RegExp(`^(apr_\\S+)\\s.*call ${callId}`, "m").exec(listed)?.[1];
      expect(approvalId, listed).toBeDefined();
      const tail = spawn(process.execPath, [CLI, "tail", "--call", callId], { env });
      tails.push(tail);
      let tailed = "";
      tail.stdout.on("data", (chunk: Buffer) => (tailed += chunk.toString()));
      await waitFor(() => tailed.includes("call.approval_requested") || undefined, { description: "the tail replaying the approval request" });
      expect(tailed).toMatch(new RegExp(`call\\.approval_requested\\s+${callId}\\s+save_evidence ${approvalId!} expires \\S+Z`));

      expect(await toolgate(["approvals", "approve", approvalId!], approver)).toBe(`approved ${approvalId!}\n`);
      await waitFor(() => tailed.includes("call.approval_granted") || undefined, { description: "the tail following the grant live" });
      expect(tailed).toMatch(new RegExp(`call\\.approval_granted\\s+${callId}\\s+save_evidence ${approvalId!} by carol`));

      // Approved, the write runs, and the waiting command prints the run that ended.
      expect(await exited).toBe(0);
      expect(stdout).toMatch(/^run_\S+\s+completed/);
      expect(stdout).toMatch(/save_evidence\s+completed ok/);
      expect(stdout).not.toContain("awaiting approval");
      expect(stderr.match(/is waiting for an approval/g)).toHaveLength(1);
    } finally {
      waiting.kill("SIGINT");
      for (const tail of tails) tail.kill("SIGINT");
    }
  });
});
