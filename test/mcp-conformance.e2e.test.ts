import { execFile } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createServer, request as httpRequest, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { REPO_ROOT, Stack, testInfra } from "@toolgate/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// The MCP conformance suite's server scenarios against a front door whose registry holds the suite's fixture
// tools (tool set `conformance`), each call going through policy and the executor. The suite's client sends no
// credentials, so it talks to a forwarder that adds alice's API key and passes everything else (Host, Origin
// included) through unchanged: the front door it tests is the real one, authentication included.
const CLI = `${REPO_ROOT}test/node_modules/@modelcontextprotocol/conformance/dist/index.js`;
const EXPECTED_FAILURES = `${REPO_ROOT}test/fixtures/mcp-conformance-expected-failures.yml`;

let stack: Stack;
let forwarder: Server;
let outputDir: string;

beforeAll(async () => {
  const infra = testInfra();
  stack = await Stack.start({ natsUrl: infra.natsUrl, mongoUrl: infra.mongoUrl, toolsets: ["conformance"] });
  const target = new URL(stack.orchestratorUrl);
  forwarder = createServer((req, res) => {
    const upstream = httpRequest(
      {
        host: target.hostname,
        port: target.port,
        path: req.url,
        method: req.method,
        headers: { ...req.headers, authorization: `Bearer ${stack.apiKeys.alice}` },
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on("error", () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => forwarder.listen(0, "127.0.0.1", resolve));
  outputDir = mkdtempSync(join(tmpdir(), "mcp-conformance-"));
});

afterAll(async () => {
  await new Promise((resolve) => forwarder?.close(resolve));
  await stack?.stop();
  if (outputDir) rmSync(outputDir, { recursive: true, force: true });
});

describe("MCP conformance suite (server scenarios)", () => {
  it("passes every scenario not listed, with its reason, in the expected-failures file", async () => {
    const url = `http://localhost:${(forwarder.address() as AddressInfo).port}/mcp`;
    const run = await new Promise<{ code: number; output: string }>((resolve) => {
      execFile(
        process.execPath,
        [CLI, "server", "--url", url, "--expected-failures", EXPECTED_FAILURES, "--output-dir", outputDir],
        { timeout: 300_000, maxBuffer: 16 * 1024 * 1024, env: { PATH: process.env.PATH ?? "", NO_COLOR: "1" } },
        (error, stdout, stderr) => resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, output: `${stdout}\n${stderr}` }),
      );
    });
    // The suite's own verdict: 0 when exactly the listed scenarios fail (a listed one that passes is stale: 1).
    expect(run.code, run.output).toBe(0);

    // Each scenario's checks, as the suite saved them: every scenario not listed passed all of its checks.
    const expected = new Set([...readFileSync(EXPECTED_FAILURES, "utf8").matchAll(/^\s+- ([a-z0-9-]+)\s*$/gm)].map((m) => m[1]!));
    const scenarios = readdirSync(outputDir, { recursive: true })
      .map(String)
      .filter((f) => f.endsWith("checks.json"));
    const failedBy = new Map<string, string[]>();
    for (const file of scenarios) {
      const scenario = /server-(.+?)-\d{4}-/.exec(file)?.[1] ?? file;
      const checks = JSON.parse(readFileSync(join(outputDir, file), "utf8")) as { id: string; status: string }[];
      failedBy.set(
        scenario,
        checks.filter((c) => c.status === "FAILURE").map((c) => c.id),
      );
    }
    expect(failedBy.size).toBeGreaterThanOrEqual(30);
    const passed = [...failedBy].filter(([, failures]) => failures.length === 0).map(([s]) => s);
    expect(passed).toEqual(
      expect.arrayContaining([
        "server-initialize",
        "ping",
        "logging-set-level",
        "tools-list",
        "tools-call-simple-text",
        "tools-call-error",
        "tools-call-with-logging",
        "tools-call-with-progress",
        "server-sse-multiple-streams",
        "dns-rebinding-protection",
      ]),
    );
    for (const [scenario, failures] of failedBy) if (!expected.has(scenario)) expect([scenario, failures]).toEqual([scenario, []]);
  }, 360_000);
});
