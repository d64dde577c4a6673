import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { newCallId, newRunId } from "@toolgate/contracts";
import { ToolContractSchema, type ToolContext, type ToolContract } from "@toolgate/registry";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HttpTransport, retryAfterMs } from "./http-transport.js";

// The HTTP transport against a real local server: headers sent, status codes mapped, bodies bounded.

type Route = (req: IncomingMessage, res: ServerResponse, body: string) => void;
const routes = new Map<string, Route>();
const seen: { path: string; headers: IncomingMessage["headers"]; body: string }[] = [];
let server: Server;
let origin: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      seen.push({ path: req.url ?? "", headers: req.headers, body });
      const route = routes.get(req.url ?? "");
      if (route) route(req, res, body);
      else res.writeHead(404).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  origin = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
});

function contract(path: string, over: Record<string, unknown> = {}): ToolContract {
  return ToolContractSchema.parse({
    name: "remote_write",
    version: "1.0.0",
    description: "Writes something remotely. Use only in these tests; it has no other purpose.",
    owner: "test",
    input_schema: { type: "object" },
    output_schema: { type: "object" },
    side_effect: "write",
    risk: "low",
    timeout_ms: 1_000,
    idempotency: { kind: "keyed" },
    transport: { kind: "http", url: `http://tools.example.test${path}` },
    limits: { max_argument_bytes: 1_024, max_result_bytes: 256, max_depth: 8 },
    ...over,
  });
}

function context(signal = new AbortController().signal): ToolContext {
  return {
    callId: newCallId(),
    runId: newRunId(),
    principal: { tenant: "acme", subject: "alice", roles: ["r"] },
    context: {},
    idempotencyKey: "remote_write:run:call",
    signal,
  };
}

const transport = (): HttpTransport => new HttpTransport({ endpoints: { "http://tools.example.test": origin }, connections: 4 });

describe("HttpTransport", () => {
  it("refuses origins that are not on the allow-list", () => {
    expect(transport().refusal(contract("/ok"))).toBeUndefined();
    const elsewhere = ToolContractSchema.parse({ ...contract("/ok"), transport: { kind: "http", url: "https://evil.example/x" } });
    expect(transport().refusal(elsewhere)).toContain("not an allowed");
  });

  it("sends the arguments with the Idempotency-Key and returns the JSON answer as data", async () => {
    routes.set("/ok", (_req, res) => res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ id: "T-1" })));
    const ctx = context();
    const answer = await transport().call(contract("/ok"), { title: "x" }, ctx);
    expect(answer.outcome).toEqual({ ok: true, data: { id: "T-1" } });
    const request = seen.at(-1)!;
    expect(request.headers["idempotency-key"]).toBe("remote_write:run:call");
    expect(request.headers["x-toolgate-call-id"]).toBe(ctx.callId);
    expect(JSON.parse(request.body)).toMatchObject({ arguments: { title: "x" }, call_id: ctx.callId, principal: { tenant: "acme", subject: "alice" } });
  });

  it("maps 503 and 429 to retryable codes with Retry-After in milliseconds", async () => {
    routes.set("/busy", (_req, res) => res.writeHead(503, { "retry-after": "2" }).end("down"));
    routes.set("/limited", (_req, res) => res.writeHead(429).end());
    expect((await transport().call(contract("/busy"), {}, context())).outcome).toMatchObject({
      ok: false,
      code: "UPSTREAM_UNAVAILABLE",
      retryable: true,
      details: { retry_after_ms: 2_000 },
    });
    expect((await transport().call(contract("/limited"), {}, context())).outcome).toMatchObject({ ok: false, code: "RATE_LIMITED", retryable: true });
  });

  it("passes a typed error through and keeps an untyped error body out of the outcome", async () => {
    routes.set("/typed", (_req, res) => res.writeHead(409).end(JSON.stringify({ error: { code: "STATE_CONFLICT", message: "ticket is closed" } })));
    routes.set("/crash", (_req, res) => res.writeHead(500).end("Traceback: KeyError at /opt/app/secret.py"));
    expect((await transport().call(contract("/typed"), {}, context())).outcome).toEqual({
      ok: false,
      code: "STATE_CONFLICT",
      message: "ticket is closed",
      retryable: false,
    });
    const crash = await transport().call(contract("/crash"), {}, context());
    expect(crash.outcome).toMatchObject({ ok: false, code: "EXECUTION_ERROR" });
    expect(JSON.stringify(crash.outcome)).not.toContain("secret.py");
    expect(JSON.stringify(crash.evidence)).toContain("secret.py");
  });

  it("stops reading a body above the result limit", async () => {
    routes.set("/huge", (_req, res) => res.writeHead(200).end(JSON.stringify({ blob: "x".repeat(10_000) })));
    expect((await transport().call(contract("/huge"), {}, context())).outcome).toMatchObject({ ok: false, code: "RESULT_TOO_LARGE" });
  });

  it("answers accepted for a 202 with an operation id", async () => {
    routes.set("/job", (_req, res) => res.writeHead(202).end(JSON.stringify({ operation_id: "job-9" })));
    expect((await transport().call(contract("/job", { long_running: true }), {}, context())).outcome).toEqual({ ok: "accepted", operation_id: "job-9" });
  });

  it("reports a refused connection as unavailable (nothing was sent) and a reset after sending as unknown", async () => {
    const closed = new HttpTransport({ endpoints: { "http://tools.example.test": "http://127.0.0.1:9" }, connections: 1 });
    expect((await closed.call(contract("/ok"), {}, context())).outcome).toMatchObject({ ok: false, code: "UPSTREAM_UNAVAILABLE", retryable: true });
    routes.set("/reset", (req) => req.socket.destroy());
    expect((await transport().call(contract("/reset"), {}, context())).outcome).toMatchObject({ ok: false, code: "OUTCOME_UNKNOWN" });
    // A read that lost its connection cannot have had an effect.
    expect((await transport().call(contract("/reset", { side_effect: "read", idempotency: { kind: "natural" } }), {}, context())).outcome).toMatchObject({
      code: "UPSTREAM_UNAVAILABLE",
    });
  });
});

describe("retryAfterMs", () => {
  it("reads delta-seconds and HTTP dates", () => {
    expect(retryAfterMs("3")).toBe(3_000);
    expect(retryAfterMs(new Date(10_000).toUTCString(), 4_000)).toBe(6_000);
    expect(retryAfterMs("soon")).toBeUndefined();
    expect(retryAfterMs(undefined)).toBeUndefined();
  });
});
