import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Stack, testInfra } from "@toolgate/testkit";
import { MongoClient, type Db } from "mongodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// A client that retries with its Idempotency-Key gets the original answer and never a second effect; a host that
// sends its own call id again within a run gets the same call. Effects are counted in the tools' own ledger.

let stack: Stack;
let mongo: MongoClient;
let runtime: Db;
let tools: Db;
let dave: string;

beforeAll(async () => {
  const infra = testInfra();
  stack = await Stack.start({ natsUrl: infra.natsUrl, mongoUrl: infra.mongoUrl, toolsets: ["chaos", "research"], logLevel: "warn" });
  mongo = await new MongoClient(infra.mongoUrl).connect();
  runtime = mongo.db(`${stack.name}_runtime`);
  tools = mongo.db(`${stack.name}_tools`);
  // Another researcher of the same tenant: same permissions, another principal.
  dave = await stack.jwt({ sub: "dave", roles: ["researcher"] });
});

afterAll(async () => {
  await stack?.stop();
  await tools?.dropDatabase();
  await runtime?.dropDatabase();
  await mongo?.close();
});

interface Answer {
  status: number;
  headers: Headers;
  body: {
    run_id?: string;
    results?: { id: string; call_id: string; status: string; result?: { ok: boolean; data?: { effect_id?: string } } }[];
    error?: { code: string; details?: Record<string, unknown> };
  };
}

async function post(path: string, body: unknown, options: { key?: string; credential?: string } = {}): Promise<Answer> {
  const response = await fetch(`${stack.orchestratorUrl}${path}`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${options.credential ?? stack.apiKeys.alice}`,
      "content-type": "application/json",
      ...(options.key === undefined ? {} : { "idempotency-key": options.key }),
    },
    body: JSON.stringify(body),
  });
  return { status: response.status, headers: response.headers, body: (await response.json()) as Answer["body"] };
}

const write = (n: number, delayMs = 0, id = `host-${n}`) => ({ id, name: "chaos_write", arguments: { n, delay_ms: delayMs, effect: "after_delay" } });

/** The effects the tool recorded for argument `n` (each execution records one). */
async function effectsOf(n: number): Promise<{ call_id: string }[]> {
  const all = await tools.collection<{ call_id: string; data_json?: string }>("effects").find({}).toArray();
  return all.filter((e) => e.data_json !== undefined && (JSON.parse(e.data_json) as { n?: number }).n === n);
}

describe("Idempotency-Key on POST /v1/tool-calls", () => {
  it("replays the original answer to a retry and executes once, whatever wait_ms the retry asks for", async () => {
    const first = await post("/v1/tool-calls", { calls: [write(101)], wait_ms: 10_000 }, { key: "k-101" });
    expect(first.status).toBe(200);
    expect(first.body.results![0]).toMatchObject({ id: "host-101", status: "done", result: { ok: true } });
    const retry = await post("/v1/tool-calls", { calls: [write(101)], wait_ms: 0 }, { key: '"k-101"' });
    expect(retry.status).toBe(200);
    expect(retry.headers.get("idempotent-replayed")).toBe("true");
    expect(retry.body).toEqual(first.body);
    expect(await effectsOf(101)).toHaveLength(1);
  });

  it("refuses the same key with another payload (422) and creates nothing for it", async () => {
    const first = await post("/v1/tool-calls", { calls: [write(102)], wait_ms: 10_000 }, { key: "k-102" });
    expect(first.status).toBe(200);
    const other = await post("/v1/tool-calls", { calls: [write(103)], wait_ms: 10_000 }, { key: "k-102" });
    expect(other.status).toBe(422);
    expect(other.body.error).toMatchObject({ code: "IDEMPOTENCY_KEY_REUSED" });
    // The one with the key's payload is done; the refused one was never submitted.
    const control = await post("/v1/tool-calls", { calls: [write(103)], wait_ms: 10_000 });
    expect(control.status).toBe(200);
    expect(await effectsOf(103)).toHaveLength(1);
    expect(await effectsOf(102)).toHaveLength(1);
  });

  it("keeps two principals' uses of one key apart", async () => {
    const alice = await post("/v1/tool-calls", { calls: [write(104)], wait_ms: 10_000 }, { key: "k-shared" });
    const byDave = await post("/v1/tool-calls", { calls: [write(104)], wait_ms: 10_000 }, { key: "k-shared", credential: dave });
    expect([alice.status, byDave.status]).toEqual([200, 200]);
    expect(byDave.headers.get("idempotent-replayed")).toBeNull();
    expect(byDave.body.run_id).not.toBe(alice.body.run_id);
    expect(byDave.body.results![0]!.call_id).not.toBe(alice.body.results![0]!.call_id);
    expect((await effectsOf(104)).map((e) => e.call_id).sort()).toEqual([alice.body.results![0]!.call_id, byDave.body.results![0]!.call_id].sort());
    // Another payload under dave's key is refused for dave only.
    expect((await post("/v1/tool-calls", { calls: [write(105)] }, { key: "k-shared", credential: dave })).status).toBe(422);
  });

  it("lets concurrent requests with one key create one call: the others join it or are told it is in flight", async () => {
    const answers = await Promise.all(Array.from({ length: 6 }, () => post("/v1/tool-calls", { calls: [write(106, 300)], wait_ms: 10_000 }, { key: "k-106" })));
    for (const a of answers) expect([200, 409]).toContain(a.status);
    const joined = answers.filter((a) => a.status === 200);
    expect(joined.length).toBeGreaterThan(0);
    expect(new Set(joined.map((a) => a.body.results![0]!.call_id)).size).toBe(1);
    for (const a of answers.filter((x) => x.status === 409)) {
      expect(a.body.error).toMatchObject({ code: "IDEMPOTENCY_KEY_IN_FLIGHT" });
      expect(Number(a.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    }
    const later = await post("/v1/tool-calls", { calls: [write(106, 300)], wait_ms: 10_000 }, { key: "k-106" });
    expect(later.body.results![0]).toMatchObject({ call_id: joined[0]!.body.results![0]!.call_id, status: "done" });
    expect(await effectsOf(106)).toHaveLength(1);
  });

  it("answers 409 while the key's first request is still being submitted, and takes a stale claim over without a second effect", async () => {
    const first = await post("/v1/tool-calls", { calls: [write(107)], wait_ms: 10_000 }, { key: "k-107" });
    expect(first.status).toBe(200);
    const keys = runtime.collection("host_idempotency");
    // As another replica leaves it between claiming the key and learning its calls' ids (and, later, when it died
    // there). A restarted orchestrator is that other replica: it knows the key only from the store (the process
    // that submitted answers its own retries from memory).
    await stack.process("orchestrator").stop();
    await stack.startService("orchestrator");
    await keys.updateOne({ key: "k-107" }, { $set: { state: "claimed", lease_until: new Date(Date.now() + 60_000) }, $unset: { call_ids: "" } });
    // The submission's record (by claim generation) is what says the work exists: without it the claim is bare.
    const claim = (await keys.findOne({ key: "k-107" }))!;
    expect(
      (await runtime.collection("host_idempotency_submissions").deleteOne({ _id: `${String(claim._id)}:${String(claim.gen)}` as never })).deletedCount,
    ).toBe(1);
    const inFlight = await post("/v1/tool-calls", { calls: [write(107)], wait_ms: 10_000 }, { key: "k-107" });
    expect(inFlight.status).toBe(409);
    expect(inFlight.body.error).toMatchObject({ code: "IDEMPOTENCY_KEY_IN_FLIGHT" });
    expect(Number(inFlight.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    await keys.updateOne({ key: "k-107" }, { $set: { lease_until: new Date(Date.now() - 1) } });
    const takenOver = await post("/v1/tool-calls", { calls: [write(107)], wait_ms: 10_000 }, { key: "k-107" });
    expect(takenOver.status).toBe(200);
    // Re-submitted into the run pinned at the claim, where the provider call id names the call that already ran.
    expect(takenOver.body.run_id).toBe(first.body.run_id);
    expect(takenOver.body.results![0]).toMatchObject({ call_id: first.body.results![0]!.call_id, status: "done" });
    expect(await effectsOf(107)).toHaveLength(1);
  });

  it("refuses a malformed key with 400 before doing anything", async () => {
    for (const key of ["has space", "x".repeat(256), 'quo"te', "back\\slash"]) {
      const answer = await post("/v1/tool-calls", { calls: [write(108)] }, { key });
      expect(answer.status).toBe(400);
      expect(answer.body.error).toMatchObject({ code: "INVALID_IDEMPOTENCY_KEY" });
    }
    expect(await effectsOf(108)).toHaveLength(0);
  });
});

describe("the same provider call id within a run", () => {
  it("is the same call with the same arguments and a typed conflict with others", async () => {
    const first = await post("/v1/tool-calls", { calls: [write(201)], wait_ms: 10_000 });
    const runId = first.body.run_id!;
    const callId = first.body.results![0]!.call_id;
    const again = await post("/v1/tool-calls", { run_id: runId, calls: [write(201)], wait_ms: 10_000 });
    expect(again.status).toBe(200);
    expect(again.body.results![0]).toMatchObject({ id: "host-201", call_id: callId, status: "done", result: first.body.results![0]!.result });
    const conflict = await post("/v1/tool-calls", { run_id: runId, calls: [write(202, 0, "host-201")], wait_ms: 10_000 });
    expect(conflict.status).toBe(422);
    expect(conflict.body.error).toMatchObject({ code: "PROVIDER_CALL_ID_CONFLICT", details: { call_id: callId } });
    expect(await effectsOf(201)).toHaveLength(1);
    expect(await effectsOf(202)).toHaveLength(0);
  });

  it("stays one call when submitted concurrently", async () => {
    const { body } = await post("/v1/tool-calls", { calls: [write(203)], wait_ms: 10_000 });
    const runId = body.run_id!;
    const answers = await Promise.all(Array.from({ length: 5 }, () => post("/v1/tool-calls", { run_id: runId, calls: [write(204, 200)], wait_ms: 10_000 })));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200]);
    expect(new Set(answers.map((a) => a.body.results![0]!.call_id)).size).toBe(1);
    expect(await effectsOf(204)).toHaveLength(1);
  });
});

describe("Idempotency-Key on the other front doors", () => {
  it("replays POST /v1/runs with the run it started, and refuses another payload", async () => {
    const body = { model: "scripted:c04", input: "idempotent run" };
    const first = await post("/v1/runs", body, { key: "run-1" });
    expect(first.status).toBe(202);
    const retry = await post("/v1/runs", body, { key: "run-1" });
    expect(retry.status).toBe(202);
    expect(retry.body.run_id).toBe(first.body.run_id);
    expect(retry.headers.get("idempotent-replayed")).toBe("true");
    expect((await post("/v1/runs", { ...body, input: "another" }, { key: "run-1" })).status).toBe(422);
    expect(await runtime.collection("runs").countDocuments({ input: "idempotent run" })).toBe(1);
  });

  it("replays POST /v1/providers/{p}/tool-calls with the original calls' results", async () => {
    const response = {
      id: "chatcmpl-1",
      object: "chat.completion",
      created: 0,
      model: "m",
      choices: [
        {
          index: 0,
          finish_reason: "tool_calls",
          message: {
            role: "assistant",
            content: null,
            tool_calls: [
              { id: "call_p1", type: "function", function: { name: "chaos_write", arguments: JSON.stringify({ n: 301, delay_ms: 0, effect: "after_delay" }) } },
            ],
          },
        },
      ],
    };
    const first = await post("/v1/providers/openai-chat/tool-calls", { response, wait_ms: 10_000 }, { key: "p-301" });
    expect(first.status).toBe(200);
    const retry = await post("/v1/providers/openai-chat/tool-calls", { response, wait_ms: 10_000 }, { key: "p-301" });
    expect(retry.status).toBe(200);
    expect(retry.body).toEqual(first.body);
    expect(await effectsOf(301)).toHaveLength(1);
  });

  it("makes an MCP tools/call with _meta's key the same call when retried", async () => {
    const client = new Client({ name: "toolgate-e2e", version: "1.0.0" });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${stack.orchestratorUrl}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${stack.apiKeys.alice}` } },
      }),
    );
    try {
      const call = (n: number) =>
        client.callTool({ name: "chaos_write", arguments: { n, delay_ms: 0, effect: "after_delay" }, _meta: { "toolgate/idempotency-key": "mcp-401" } });
      const first = await call(401);
      expect(first.isError).toBe(false);
      const retry = await call(401);
      expect(retry.structuredContent).toEqual(first.structuredContent);
      await expect(call(402)).rejects.toMatchObject({ code: -32602, data: { code: "IDEMPOTENCY_KEY_REUSED" } });
      expect(await effectsOf(401)).toHaveLength(1);
      expect(await effectsOf(402)).toHaveLength(0);
    } finally {
      await client.close();
    }
  });
});

it("keeps a key for the stated retention (24 h by default)", async () => {
  const record = (await runtime.collection<{ key: string; created_at: Date; expires_at: Date }>("host_idempotency").findOne({ key: "k-101" }))!;
  expect(record.expires_at.getTime() - record.created_at.getTime()).toBe(24 * 3_600_000);
});
