import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer as createHttpServer, type IncomingMessage, type Server } from "node:http";
import { createServer as createNetServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { connect } from "@nats-io/transport-node";
import { sha256 } from "@toolgate/contracts";
import { ContractCatalog } from "@toolgate/registry";
import { CHAOS_HTTP_ORIGIN, MUTABLE_GREET_DEFINITION_HASH, chaosContracts } from "@toolgate/test-toolsets";
import { callTool, Stack, testInfra, waitFor, waitForCallEvents, settledCallEvents } from "@toolgate/testkit";
import { MongoClient } from "mongodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// Tools beside in-process handlers: an HTTP tool (undici, Idempotency-Key) served by this test, and MCP tools
// on real MCP servers started as separate processes: the official `everything` (Streamable HTTP) and
// `memory` (stdio, spawned by the executor) servers, and a test server whose tool definition changes.

const moduleFile = (path: string): string => fileURLToPath(new URL(path, import.meta.url));
const EVERYTHING = moduleFile("./node_modules/@modelcontextprotocol/server-everything/dist/index.js");
const MEMORY = moduleFile("./node_modules/@modelcontextprotocol/server-memory/dist/index.js");
const MUTABLE = moduleFile("./fixtures/mutable-mcp-server.mjs");

let stack: Stack;
let mongo: MongoClient;
let http: Server;
let memoryDir: string;
let mutablePort: string;
const children: ChildProcess[] = [];

/** The far side of chaos_http_write: one effect per Idempotency-Key, whatever the number of requests. */
const far = {
  effects: new Map<string, number>(),
  requests: [] as { path: string; key: string | undefined; body: { arguments: Record<string, unknown>; call_id: string } }[],
};

async function readBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

function startFarSide(): Promise<number> {
  http = createHttpServer((req, res) => {
    void (async () => {
      const body = (await readBody(req)) as { arguments: Record<string, unknown>; call_id: string };
      const key = req.headers["idempotency-key"] as string | undefined;
      far.requests.push({ path: req.url ?? "", key, body });
      const json = (status: number, value: unknown, headers: Record<string, string> = {}): void => {
        res.writeHead(status, { "content-type": "application/json", ...headers }).end(JSON.stringify(value));
      };
      if (req.url === "/status") {
        const asked = String(body.arguments.idempotency_key);
        const count = far.effects.get(asked);
        json(200, count === undefined ? { state: "not_applied" } : { state: "applied", result: { n: 0, effects: count } });
        return;
      }
      const mode = body.arguments.mode;
      const seen = far.requests.filter((r) => r.key === key && r.path === "/write").length;
      if (mode === "unavailable_once" && seen === 1) return json(503, { message: "warming up" }, { "retry-after": "1" });
      if (mode === "server_error") return json(500, { trace: "Traceback: psycopg2.OperationalError password=hunter2 at /opt/app/db.py:12" });
      if (!far.effects.has(key!)) far.effects.set(key!, 1);
      const answer = { n: body.arguments.n, effects: far.effects.get(key!) };
      // Applied at once, answered after the client's timeout: the client cannot know.
      if (mode === "slow_applied") setTimeout(() => json(200, answer), 2_500);
      else json(200, answer, { "x-request-id": `far-${body.call_id}` });
    })();
  });
  return new Promise((resolve) => http.listen(0, "127.0.0.1", () => resolve((http.address() as { port: number }).port)));
}

async function freePort(): Promise<number> {
  const server = createNetServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Starts `node <args>` as its own process and resolves with the first output line matching `ready`. */
async function startProcess(args: string[], env: Record<string, string>, ready: RegExp): Promise<string> {
  const child = spawn(process.execPath, args, { env: { PATH: process.env.PATH ?? "", ...env }, stdio: ["ignore", "pipe", "pipe"] });
  children.push(child);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${args[0]} not ready`)), 20_000);
    const onLine = (line: string): void => {
      const match = ready.exec(line);
      if (match) {
        clearTimeout(timer);
        resolve(match[1] ?? line);
      }
    };
    createInterface({ input: child.stdout }).on("line", onLine);
    createInterface({ input: child.stderr }).on("line", onLine);
    child.once("exit", (code) => reject(new Error(`${args[0]} exited with ${code}`)));
  });
}

beforeAll(async () => {
  const infra = testInfra();
  const farPort = await startFarSide();
  const everythingPort = await freePort();
  await startProcess([EVERYTHING, "streamableHttp"], { PORT: String(everythingPort) }, /listening on port/);
  mutablePort = await startProcess([MUTABLE], {}, /^listening (\d+)/);
  memoryDir = mkdtempSync(join(tmpdir(), "toolgate-memory-"));
  stack = await Stack.start({
    natsUrl: infra.natsUrl,
    mongoUrl: infra.mongoUrl,
    toolsets: ["chaos", "mcp_examples"],
    env: {
      executor: {
        EXECUTOR_ACK_WAIT_MS: "5000",
        EXECUTOR_LEASE_MARGIN_MS: "500",
        EXECUTOR_RECONCILE_DELAY_MS: "2000",
        EXECUTOR_OPERATION_POLL_MS: "200",
        EXECUTOR_MCP_RECHECK_MS: "500",
        EXECUTOR_HTTP_ENDPOINTS: JSON.stringify({ [CHAOS_HTTP_ORIGIN]: `http://127.0.0.1:${farPort}` }),
        EXECUTOR_MCP_SERVERS: JSON.stringify({
          everything: { transport: "streamable_http", url: `http://127.0.0.1:${everythingPort}/mcp` },
          memory: { transport: "stdio", command: process.execPath, args: [MEMORY], env: { MEMORY_FILE_PATH: join(memoryDir, "memory.jsonl") } },
          mutable: { transport: "streamable_http", url: `http://127.0.0.1:${mutablePort}/mcp` },
        }),
      },
    },
  });
  mongo = await new MongoClient(infra.mongoUrl).connect();
});

afterAll(async () => {
  await stack?.stop();
  for (const child of children) child.kill();
  await new Promise((resolve) => (http ? http.close(resolve) : resolve(undefined)));
  if (memoryDir) rmSync(memoryDir, { recursive: true, force: true });
  await mongo?.db(`${stack.name}_runtime`).dropDatabase();
  await mongo?.db(`${stack.name}_tools`).dropDatabase();
  await mongo?.close();
});

describe("an HTTP tool", () => {
  it("sends the runtime's idempotency key and returns the far side's answer", async () => {
    const { runId, callId, result } = await callTool(stack, "chaos_http_write", { n: 1, mode: "ok" });
    expect(result).toMatchObject({ ok: true, data: { n: 1, effects: 1 } });
    const requests = far.requests.filter((r) => r.body.call_id === callId);
    expect(requests.map((r) => r.key)).toEqual([`chaos_http_write:${runId}:${callId}`]);
    // The audit chain keeps who answered: the far side's request id and the digest of its raw answer.
    const completed = (await settledCallEvents(stack, callId)).find((e) => e.type === "completed")!;
    expect(completed.payload.downstream).toEqual({
      transport: "http",
      request_id: `far-${callId}`,
      raw_output_hash: sha256(JSON.stringify({ n: 1, effects: 1 })),
    });
  });

  it("retries a 503 after its Retry-After with the same key, and the far side applies the effect once", async () => {
    const { runId, callId, result } = await callTool(stack, "chaos_http_write", { n: 2, mode: "unavailable_once" });
    expect(result).toMatchObject({ ok: true, data: { n: 2, effects: 1 } });
    const key = `chaos_http_write:${runId}:${callId}`;
    expect(far.requests.filter((r) => r.key === key && r.path === "/write")).toHaveLength(2);
    const events = await settledCallEvents(stack, callId);
    const scheduled = events.find((e) => e.type === "retry_scheduled")!;
    expect(scheduled.payload).toMatchObject({ code: "UPSTREAM_UNAVAILABLE" });
    expect(scheduled.payload.delay_ms).toBeGreaterThanOrEqual(1_000);
    const secondStart = events.find((e) => e.type === "started" && (e as { attempt?: number }).attempt === 2)!;
    expect(Date.parse(secondStart.time) - Date.parse(scheduled.time)).toBeGreaterThanOrEqual(1_000);
  });

  it("reports a timeout after the request was sent as OUTCOME_UNKNOWN and reconciles it through the HTTP status check", async () => {
    const { runId, callId, result } = await callTool(stack, "chaos_http_write", { n: 3, mode: "slow_applied" });
    expect(result).toMatchObject({ ok: false, error: { code: "OUTCOME_UNKNOWN" } });
    const events = await waitForCallEvents(stack, callId, (es) => es.some((e) => e.type === "reconciled"), { description: "the reconciliation" });
    expect(events.find((e) => e.type === "reconciled")!.payload).toMatchObject({ outcome: "applied", result: { ok: true, data: { effects: 1 } } });
    const key = `chaos_http_write:${runId}:${callId}`;
    // One write request (never retried blindly), then status checks that carry the same key.
    expect(far.requests.filter((r) => r.key === key && r.path === "/write")).toHaveLength(1);
    expect(far.requests.filter((r) => r.key === key && r.path === "/status").length).toBeGreaterThanOrEqual(1);
  });

  it("never forwards an untyped server error's body", async () => {
    const { result } = await callTool(stack, "chaos_http_write", { n: 4, mode: "server_error" });
    expect(result).toMatchObject({ ok: false, error: { code: "EXECUTION_ERROR" }, retryable: false });
    expect(JSON.stringify(result)).not.toMatch(/hunter2|psycopg2|\/opt\/app/);
    const evidence = await mongo
      .db(`${stack.name}_runtime`)
      .collection("execution_evidence")
      .findOne({ _id: result!.evidence_ref as never });
    expect(JSON.stringify(evidence?.detail)).toContain("psycopg2");
  });
});

describe("MCP tools", () => {
  it("calls a tool of the official `everything` server over Streamable HTTP", async () => {
    const { callId, result } = await callTool(stack, "everything_echo", { message: "hello from toolgate" });
    expect(result).toMatchObject({ ok: true, data: { content: [{ type: "text", text: "Echo: hello from toolgate" }] } });
    const completed = (await settledCallEvents(stack, callId)).find((e) => e.type === "completed")!;
    expect(completed.payload.downstream).toMatchObject({ transport: "mcp", raw_output_hash: expect.stringMatching(/^sha256:[0-9a-f]{64}$/) });
  });

  it("writes through the official `memory` server over stdio, once, and reads it back", async () => {
    const entity = { name: "Toolgate", entityType: "project", observations: ["runs each side effect at most once"] };
    const created = await callTool(stack, "memory_create_entities", { entities: [entity] });
    expect(created.result).toMatchObject({ ok: true, data: { entities: [entity] } });
    const lines = readFileSync(join(memoryDir, "memory.jsonl"), "utf8").trim().split("\n");
    expect(lines.filter((l) => l.includes('"Toolgate"'))).toHaveLength(1);
    const graph = await callTool(stack, "memory_read_graph", {});
    expect(graph.result).toMatchObject({ ok: true, data: { entities: [entity], relations: [] } });
  });

  it("quarantines a server whose tool definition changes, and keeps serving the others", async () => {
    const before = await callTool(stack, "chaos_mcp_greet", { name: "Ada" });
    expect(before.result).toMatchObject({ ok: true, data: { content: [{ type: "text", text: "Hello, Ada!" }] } });

    // The server now describes `greet` differently (and tells its clients so): not what the contract approved.
    await fetch(`http://127.0.0.1:${mutablePort}/mutate`, { method: "POST" });
    const refused = await waitFor(
      async () => {
        const { result } = await callTool(stack, "chaos_mcp_greet", { name: "Ada" });
        return result?.ok === false ? result : undefined;
      },
      { timeoutMs: 15_000, description: "the quarantine taking effect" },
    );
    expect(refused).toMatchObject({ ok: false, error: { code: "TOOL_DISABLED" } });
    // The executor records the quarantine for operators behind the refusal: waited for, not raced.
    // (A missing record is `null`, which waitFor would take for an answer: it waits for `undefined` to change.)
    const record = await waitFor(
      async () => (await mongo.db(`${stack.name}_runtime`).collection("mcp_quarantines").findOne({ server: "mutable" })) ?? undefined,
      {
        timeoutMs: 10_000,
        description: "the quarantine's record",
      },
    );
    expect(record).toMatchObject({ tool: "greet", expected: MUTABLE_GREET_DEFINITION_HASH });
    expect(record.observed).toMatch(/^sha256:/);
    expect(record.observed).not.toBe(MUTABLE_GREET_DEFINITION_HASH);
    // Still quarantined on the next call: a definition change is never forgotten without a new approval.
    expect((await callTool(stack, "chaos_mcp_greet", { name: "Bo" })).result).toMatchObject({ ok: false, error: { code: "TOOL_DISABLED" } });
    const echo = await callTool(stack, "everything_echo", { message: "still here" });
    expect(echo.result).toMatchObject({ ok: true });
  });

  it("serves the changed definition again once a new contract version approves it, through the catalog and without a restart", async () => {
    const observed = (await mongo.db(`${stack.name}_runtime`).collection<{ observed: string }>("mcp_quarantines").findOne({ server: "mutable" }))!.observed;
    const greet = chaosContracts.find((c) => c.name === "chaos_mcp_greet")!;
    const nc = await connect({ servers: testInfra().natsUrl });
    try {
      const catalog = await ContractCatalog.connect(nc, { stream: `${stack.name.toUpperCase()}_CONTRACTS`, subjectPrefix: `${stack.name}.contracts` });
      const approved = { ...greet, version: "1.0.1", transport: { kind: "mcp" as const, server: "mutable", tool: "greet", definition_hash: observed } };
      expect(await catalog.publish(approved)).toMatchObject({ ok: true, created: true });
      catalog.close();
    } finally {
      await nc.close();
    }
    const served = await waitFor(
      async () => {
        const call = await callTool(stack, "chaos_mcp_greet", { name: "Cy" });
        return call.result?.ok === true ? call : undefined;
      },
      { timeoutMs: 15_000, description: "the new version reaching every service and releasing the quarantine" },
    );
    expect(served.result).toMatchObject({ ok: true, data: { content: [{ type: "text", text: "Hello, Cy!" }] } });
    const events = await waitForCallEvents(stack, served.callId, (es) => es.some((e) => e.type === "result_attached"));
    const decision = events.find((e) => e.type === "authorized")!.payload.decision as { tool: { version: string } };
    expect(decision.tool.version).toBe("1.0.1");
  });
});
