import { request as httpRequest } from "node:http";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema, CreateTaskResultSchema, ErrorCode, LoggingMessageNotificationSchema, McpError } from "@modelcontextprotocol/sdk/types.js";
import { Stack, testInfra, waitFor, waitForCallEvents } from "@toolgate/testkit";
import { MongoClient } from "mongodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// Any MCP host can use the registry's tools through Toolgate, with all of its checks in the path; a session is
// bound to a run and its task, and a call that needs a human waits for one through the protocol's own means.
const APPROVAL_PAGE = "https://approvals.acme.test/approvals";
const DOC = "https://example.test/docs/openai-agents-sdk/sessions";
const SEARCH = { query: "OpenAI Agents SDK sessions", source_type: "official", limit: 2 };

let stack: Stack;
let mongo: MongoClient;
let client: Client;
const clients: Client[] = [];

/** An MCP client of alice's (unless `headers` says otherwise), in a session bound to `headers`' run and task. */
async function connect(headers: Record<string, string> = {}, capabilities: Record<string, unknown> = {}): Promise<Client> {
  const c = new Client({ name: "toolgate-e2e", version: "1.0.0" }, { capabilities });
  await c.connect(
    new StreamableHTTPClientTransport(new URL(`${stack.orchestratorUrl}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${stack.apiKeys.alice}`, ...headers } },
    }),
  );
  clients.push(c);
  return c;
}

const evidence = (taskId: string) => mongo.db(`${stack.name}_tools`).collection("evidence").countDocuments({ task_id: taskId });
const envelopeOf = (result: Record<string, unknown>) => JSON.parse((result.content as { type: string; text: string }[])[0]!.text) as Record<string, unknown>;
const callIdOf = (result: { _meta?: Record<string, unknown> | undefined }) => result._meta?.["io.toolgate/call_id"] as string;

/** C04's reads in the client's session: the run is tainted by the fetched document, so its save needs a human. */
async function readForTask(c: Client): Promise<void> {
  const search = await c.callTool({ name: "search_sources", arguments: SEARCH });
  expect(search.isError).toBe(false);
  const fetched = await c.callTool({ name: "fetch_document", arguments: { url: DOC } });
  expect(fetched.isError).toBe(false);
}

async function approve(callId: string): Promise<void> {
  const approval = await waitFor(
    async () =>
      (await stack.policyApi<{ approvals: { approval_id: string; plan_hash: string }[] }>("GET", `/v1/approvals?call_id=${callId}`)).body.approvals[0],
    { description: `the approval request of ${callId}` },
  );
  const approved = await stack.policyApi("POST", `/v1/approvals/${approval.approval_id}/approve`, { plan_hash: approval.plan_hash });
  expect(approved.status).toBe(200);
}

/** A raw request to `/mcp` with exactly these headers (fetch would not let a test set Host). */
function rawMcp(
  headers: Record<string, string>,
  body: unknown,
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  const url = new URL(`${stack.orchestratorUrl}/mcp`);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        path: "/mcp",
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
      },
      (res) => {
        let text = "";
        res.on("data", (chunk: Buffer) => (text += chunk.toString()));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
      },
    );
    req.on("error", reject);
    req.end(JSON.stringify(body));
  });
}

const initialize = {
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "raw", version: "1" } },
};

beforeAll(async () => {
  const infra = testInfra();
  stack = await Stack.start({
    natsUrl: infra.natsUrl,
    mongoUrl: infra.mongoUrl,
    ruleOfTwo: true,
    // `operations` for a write that may change what exists (cancel_operation) next to research's append-only save.
    toolsets: ["research", "operations"],
    env: { orchestrator: { ORCHESTRATOR_APPROVAL_URL: APPROVAL_PAGE } },
  });
  mongo = await new MongoClient(infra.mongoUrl).connect();
  client = await connect();
});

afterAll(async () => {
  for (const c of clients) await c.close().catch(() => undefined);
  await stack?.stop();
  await mongo?.db(`${stack.name}_runtime`).dropDatabase();
  await mongo?.db(`${stack.name}_tools`).dropDatabase();
  await mongo?.close();
});

describe("MCP front door", () => {
  it("lists the registry's tools with their schemas, hints derived from their contracts, and task support", async () => {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(["cancel_operation", "fetch_document", "get_operation", "save_evidence", "search_sources"]);
    const search = tools.find((t) => t.name === "search_sources")!;
    expect(search.inputSchema).toMatchObject({ type: "object", additionalProperties: false, required: ["query", "source_type", "limit"] });
    const hints = Object.fromEntries(tools.map((t) => [t.name, t.annotations]));
    // A read: read-only, idempotent, open world (it returns outside content).
    expect(hints.search_sources).toEqual({ readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: true });
    // An append-only write (its contract says `write_effect: additive`): not destructive; keyed by the call, so a
    // new call with the same arguments saves again (not idempotent).
    expect(hints.save_evidence).toEqual({ readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false });
    // A write whose contract says nothing of its effect is taken for destructive.
    expect(hints.cancel_operation).toMatchObject({ readOnlyHint: false, destructiveHint: true });
    expect(search.execution).toEqual({ taskSupport: "optional" });
    expect(client.getServerCapabilities()).toMatchObject({ tasks: { cancel: {}, list: {}, requests: { tools: { call: {} } } }, logging: {} });
  });

  it("calls a tool through validation, policy and the executor, the result naming its call id", async () => {
    const result = await client.callTool({ name: "search_sources", arguments: SEARCH });
    expect(result.isError).toBe(false);
    const items = (result.structuredContent as { items: { source_type: string }[] }).items;
    expect(items.length).toBeGreaterThan(0);
    expect(items.every((i) => i.source_type === "official")).toBe(true);
    expect(callIdOf(result)).toMatch(/^call_/);
  });

  it("answers bad arguments with INVALID_ARGUMENTS as a tool error", async () => {
    const result = await client.callTool({ name: "search_sources", arguments: { query: "sessions", source_type: "official", limit: 50 } });
    expect(result.isError).toBe(true);
    expect(envelopeOf(result)).toMatchObject({ ok: false, error: { code: "INVALID_ARGUMENTS", details: { violations: [{ pointer: "/limit" }] } } });
  });

  it("reports a call's progress and logs it at the session's level", async () => {
    const progress: { progress: number; message?: string | undefined }[] = [];
    const logs: unknown[] = [];
    const c = await connect();
    c.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void logs.push(n.params.data));
    await c.setLoggingLevel("info");
    const result = await c.callTool({ name: "search_sources", arguments: { ...SEARCH, query: "sessions progress" } }, undefined, {
      onprogress: (p) => void progress.push(p),
    });
    expect(result.isError).toBe(false);
    const callId = callIdOf(result);
    expect(progress[0]).toMatchObject({ progress: 1, message: expect.stringContaining(`call ${callId} (search_sources) accepted`) });
    expect(progress.at(-1)).toMatchObject({ message: `call ${callId} ended: ok` });
    expect(progress.map((p) => p.progress)).toEqual(progress.map((_, i) => i + 1));
    expect(logs).toContain(`call ${callId} ended: ok`);
  });

  it("refuses an unauthenticated request with WWW-Authenticate naming its protected-resource metadata", async () => {
    const anonymous = new Client({ name: "anonymous", version: "1.0.0" });
    await expect(anonymous.connect(new StreamableHTTPClientTransport(new URL(`${stack.orchestratorUrl}/mcp`)))).rejects.toThrow();
    const refused = await rawMcp({ host: new URL(stack.orchestratorUrl).host }, initialize);
    expect(refused.status).toBe(401);
    const metadataUrl = `${stack.orchestratorUrl}/.well-known/oauth-protected-resource/mcp`;
    expect(refused.headers["www-authenticate"]).toBe(`Bearer resource_metadata="${metadataUrl}"`);
    const metadata = await fetch(metadataUrl);
    expect(metadata.status).toBe(200);
    expect(await metadata.json()).toEqual({
      resource: `${stack.orchestratorUrl}/mcp`,
      authorization_servers: [stack.jwtIssuer],
      bearer_methods_supported: ["header"],
      resource_name: "Toolgate MCP",
    });
    const root = (await (await fetch(`${stack.orchestratorUrl}/.well-known/oauth-protected-resource`)).json()) as { authorization_servers: string[] };
    expect(root.authorization_servers).toEqual([stack.jwtIssuer]);
  });

  it("refuses a DNS-rebinding request (a Host or Origin not allowed) with 403, credentials or not", async () => {
    const authorization = `Bearer ${stack.apiKeys.alice}`;
    const port = new URL(stack.orchestratorUrl).port;
    for (const headers of [
      { host: "evil.example.com", authorization },
      { host: `evil.example.com:${port}` },
      { host: `localhost:${port}`, origin: "http://evil.example.com", authorization },
    ]) {
      const refused = await rawMcp(headers, initialize);
      expect([headers, refused.status]).toEqual([headers, 403]);
      expect(JSON.parse(refused.body)).toMatchObject({ jsonrpc: "2.0", error: { code: -32000 }, id: null });
    }
    const allowed = await rawMcp({ host: `localhost:${port}`, origin: `http://localhost:${port}`, authorization }, initialize);
    expect(allowed.status).toBe(200);
    expect(allowed.headers["mcp-session-id"]).toMatch(/^mcps_/);
  });

  it("C04 over tasks: the save waits for a human as a task, approved, its result read with tasks/result", async () => {
    const c = await connect({ "toolgate-task-id": "task_mcp_tasks" });
    await readForTask(c);
    const save = { task_id: "task_mcp_tasks", claim: "Sessions keep conversation state.", source_url: DOC };
    const created = await c.request(
      { method: "tools/call", params: { name: "save_evidence", arguments: save, task: { ttl: 600_000 } } },
      CreateTaskResultSchema,
    );
    const taskId = created.task.taskId;
    expect(created.task).toMatchObject({ status: "working", ttl: 600_000, pollInterval: expect.any(Number) });
    expect(created._meta?.["io.toolgate/call_id"]).toBe(taskId);
    await waitForCallEvents(stack, taskId, (es) => es.some((e) => e.type === "approval_requested"));
    const waiting = await waitFor(
      async () => {
        const task = await c.experimental.tasks.getTask(taskId);
        return task.statusMessage?.includes("waiting for a human approval") ? task : undefined;
      },
      { description: "the task to say it waits for a human" },
    );
    expect(waiting.status).toBe("working");
    expect(waiting.statusMessage).toContain(APPROVAL_PAGE);
    expect((await c.experimental.tasks.listTasks()).tasks.map((t) => t.taskId)).toContain(taskId);
    // Another session does not see the task.
    await expect(client.experimental.tasks.getTask(taskId)).rejects.toMatchObject({ code: ErrorCode.InvalidParams });
    expect(await evidence("task_mcp_tasks")).toBe(0);

    const result = c.experimental.tasks.getTaskResult(taskId, CallToolResultSchema);
    await approve(taskId);
    const outcome = await result;
    expect(outcome.isError).toBe(false);
    expect(outcome.structuredContent).toMatchObject({ stored: true });
    expect(outcome._meta).toMatchObject({ "io.toolgate/call_id": taskId, "io.modelcontextprotocol/related-task": { taskId } });
    expect((await c.experimental.tasks.getTask(taskId)).status).toBe("completed");
    await expect(c.experimental.tasks.cancelTask(taskId)).rejects.toMatchObject({ code: ErrorCode.InvalidParams });
    expect(await evidence("task_mcp_tasks")).toBe(1);

    // Every call of the session went into one run, with the session's task as its context.
    const call = await stack.api<{ run_id: string }>("GET", `/v1/tool-calls/${taskId}`);
    const run = await stack.api<{ calls: { tool: string; status: string }[] }>("GET", `/v1/runs/${call.body.run_id}`);
    expect(run.body.calls.map((x) => [x.tool, x.status])).toEqual([
      ["search_sources", "completed"],
      ["fetch_document", "completed"],
      ["save_evidence", "completed"],
    ]);
  });

  it("C04 for a plain client: APPROVAL_REQUIRED naming the page, a retry joins the call, and after approval returns its outcome", async () => {
    const c = await connect({ "toolgate-task-id": "task_mcp_plain" });
    await readForTask(c);
    const save = { name: "save_evidence", arguments: { task_id: "task_mcp_plain", claim: "Sessions keep conversation state.", source_url: DOC } };
    const first = await c.callTool(save);
    expect(first.isError).toBe(true);
    const callId = callIdOf(first);
    const required = envelopeOf(first) as { ok: boolean; call_id: string; error: { code: string; message: string; details: Record<string, string> } };
    expect(required).toMatchObject({
      ok: false,
      call_id: callId,
      error: { code: "APPROVAL_REQUIRED", details: { approval_id: expect.stringMatching(/^apr_/) } },
    });
    expect(required.error.details.approval_url).toBe(`${APPROVAL_PAGE}?approval_id=${required.error.details.approval_id}&call_id=${callId}`);
    expect(required.error.details.result_url).toBe(`/v1/tool-calls/${callId}?wait_ms=60000`);
    expect(required.error.message).toContain("again with the same arguments in this session");
    expect(JSON.stringify(first)).not.toContain("OUTCOME_UNKNOWN");

    const again = await c.callTool(save);
    expect(callIdOf(again)).toBe(callId);
    expect((envelopeOf(again) as { error: { details: { approval_id: string } } }).error.details.approval_id).toBe(required.error.details.approval_id);

    await approve(callId);
    await waitForCallEvents(stack, callId, (es) => es.some((e) => e.type === "result_attached"));
    const outcome = await c.callTool(save);
    expect([outcome.isError, callIdOf(outcome)]).toEqual([false, callId]);
    expect(outcome.structuredContent).toMatchObject({ stored: true });
    expect(await evidence("task_mcp_plain")).toBe(1);
    const events = await waitForCallEvents(stack, callId, (es) => es.some((e) => e.type === "result_attached"));
    expect(events.filter((e) => e.type === "started")).toHaveLength(1);
  });

  it("answers a retry that joins a call waiting for a human at once, also before the orchestrator has recorded the wait", async () => {
    const c = await connect({ "toolgate-task-id": "task_mcp_early_retry" });
    await readForTask(c);
    const save = { name: "save_evidence", arguments: { task_id: "task_mcp_early_retry", claim: "Asked again at once.", source_url: DOC } };
    const first = await c.callTool(save);
    const callId = callIdOf(first);
    const approvalId = (envelopeOf(first) as { error: { details: { approval_id: string } } }).error.details.approval_id;
    // A retry can outrun the orchestrator's record of the wait (it consumes the request from the stream, behind
    // whatever else it has to do): that record is taken away here, once it has been written, to stand for one not
    // written yet. The retry's watch starts after the request went by, so only the stream still says it.
    const waits = mongo.db(`${stack.name}_runtime`).collection<{ _id: string }>("approval_waits");
    await waitFor(async () => (await waits.findOne({ _id: callId })) ?? undefined, { description: `the wait of ${callId} recorded` });
    await waits.deleteOne({ _id: callId });
    // Bounded well below the front door's own wait for the call (60 s), which an unanswered retry would sit out.
    const again = await c.callTool(save, undefined, { timeout: 10_000 });
    expect(callIdOf(again)).toBe(callId);
    expect(envelopeOf(again)).toMatchObject({ ok: false, call_id: callId, error: { code: "APPROVAL_REQUIRED", details: { approval_id: approvalId } } });
  });

  it("sends a client that supports URL elicitation to the approval page of exactly that call", async () => {
    const c = await connect({ "toolgate-task-id": "task_mcp_url" }, { elicitation: { url: {} } });
    await readForTask(c);
    const error = await c.callTool({ name: "save_evidence", arguments: { task_id: "task_mcp_url", claim: "A claim.", source_url: DOC } }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(McpError);
    const { code, data } = error as McpError & { data: { elicitations: { mode: string; url: string; elicitationId: string }[] } };
    expect(code).toBe(ErrorCode.UrlElicitationRequired);
    const [elicitation] = data.elicitations;
    expect(elicitation).toMatchObject({ mode: "url", elicitationId: expect.stringMatching(/^apr_/) });
    expect(elicitation!.url).toMatch(new RegExp(`^${APPROVAL_PAGE}\\?approval_id=${elicitation!.elicitationId}&call_id=call_`));
  });

  it("tasks/cancel of a call waiting for a human withdraws its approval request: the call ends APPROVAL_DENIED and approving it later runs nothing", async () => {
    const c = await connect({ "toolgate-task-id": "task_mcp_cancel" });
    await readForTask(c);
    const created = await c.request(
      { method: "tools/call", params: { name: "save_evidence", arguments: { task_id: "task_mcp_cancel", claim: "Withdrawn.", source_url: DOC }, task: {} } },
      CreateTaskResultSchema,
    );
    const taskId = created.task.taskId;
    const requested = await waitForCallEvents(stack, taskId, (es) => es.some((e) => e.type === "approval_requested"));
    const approvalId = (requested.find((e) => e.type === "approval_requested")!.payload as { approval_id: string }).approval_id;
    const planHash = (requested.find((e) => e.type === "approval_requested")!.payload as { plan_hash: string }).plan_hash;
    const cancelled = await c.experimental.tasks.cancelTask(taskId);
    expect(cancelled.status).toBe("cancelled");

    // The orchestrator asked (its signed cancel_requested), policy withdrew its request and ended the call.
    const trail = await waitForCallEvents(stack, taskId, (es) => es.some((e) => e.type === "result_attached"));
    expect(trail.map((e) => [e.type, e.source])).toEqual([
      ["proposed", "orchestrator"],
      ["approval_requested", "policy"],
      ["cancel_requested", "orchestrator"],
      ["denied", "policy"],
      ["result_attached", "orchestrator"],
    ]);
    expect(trail.find((e) => e.type === "denied")!.payload).toMatchObject({ result: { ok: false, error: { code: "APPROVAL_DENIED" } } });
    const call = await stack.api<{ status: string; result: { error: { code: string } } }>("GET", `/v1/tool-calls/${taskId}`);
    expect([call.body.status, call.body.result.error.code]).toEqual(["denied", "APPROVAL_DENIED"]);

    // The approver comes too late: a clear refusal, nothing authorized, the executor never starts it.
    expect((await stack.policyApi<{ approvals: unknown[] }>("GET", `/v1/approvals?call_id=${taskId}`)).body.approvals).toEqual([]);
    const late = await stack.policyApi<{ error: { code: string; message: string; details: { outcome: string } } }>(
      "POST",
      `/v1/approvals/${approvalId}/approve`,
      { plan_hash: planHash },
    );
    expect(late.status).toBe(409);
    expect(late.body.error).toMatchObject({ code: "ALREADY_DECIDED", details: { outcome: "withdrawn" } });
    expect(late.body.error.message).toContain("cancelled");
    // A later call of the session, once audit holds its end, bounds what audit has read of the stream since.
    const later = await c.callTool({ name: "search_sources", arguments: { ...SEARCH, query: "after the cancel" } });
    await waitForCallEvents(stack, callIdOf(later), (es) => es.some((e) => e.type === "result_attached"));
    const after = await waitForCallEvents(stack, taskId, (es) => es.some((e) => e.type === "result_attached"));
    expect(after.map((e) => e.type)).not.toContain("authorized");
    expect(after.map((e) => e.type)).not.toContain("started");
    expect(await evidence("task_mcp_cancel")).toBe(0);

    const task = await c.experimental.tasks.getTask(taskId);
    expect(task).toMatchObject({ status: "cancelled", statusMessage: "cancelled by the client; the call ended APPROVAL_DENIED" });
    await expect(c.experimental.tasks.cancelTask(taskId)).rejects.toMatchObject({ code: ErrorCode.InvalidParams });
  });

  it("ends a session on DELETE: its id is unknown from then on (404), and its calls keep their outcomes", async () => {
    const transport = new StreamableHTTPClientTransport(new URL(`${stack.orchestratorUrl}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${stack.apiKeys.alice}` } },
    });
    const c = new Client({ name: "toolgate-e2e", version: "1.0.0" });
    await c.connect(transport);
    clients.push(c);
    const result = await c.callTool({ name: "search_sources", arguments: { ...SEARCH, query: "before the end" } });
    const sessionId = transport.sessionId!;
    expect(sessionId).toMatch(/^mcps_/);
    const host = new URL(stack.orchestratorUrl).host;
    const list = { jsonrpc: "2.0", id: 2, method: "tools/list", params: {} };
    const auth = { host, authorization: `Bearer ${stack.apiKeys.alice}`, "mcp-protocol-version": "2025-11-25" };
    expect((await rawMcp({ ...auth, "mcp-session-id": sessionId }, list)).status).toBe(200);

    await transport.terminateSession();
    expect(transport.sessionId).toBeUndefined();
    const after = await rawMcp({ ...auth, "mcp-session-id": sessionId }, list);
    expect(after.status).toBe(404);
    expect(JSON.parse(after.body)).toMatchObject({ error: { code: -32001, message: "Session not found" } });
    // Ending a session is its client's: another principal's DELETE finds no such session.
    const bobs = await rawMcp({ ...auth, authorization: `Bearer ${stack.apiKeys.bob}`, "mcp-session-id": sessionId }, list);
    expect(bobs.status).toBe(404);
    const call = await stack.api<{ status: string }>("GET", `/v1/tool-calls/${callIdOf(result)}`);
    expect(call.body.status).toBe("completed");
  });

  it("binds a session to the run it names, and refuses a run that is not the caller's", async () => {
    const first = await client.callTool({ name: "search_sources", arguments: { ...SEARCH, query: "bound run" } });
    const call = await stack.api<{ run_id: string }>("GET", `/v1/tool-calls/${callIdOf(first)}`);
    const bound = await connect({ "toolgate-run-id": call.body.run_id });
    const second = await bound.callTool({ name: "search_sources", arguments: { ...SEARCH, query: "bound run again" } });
    expect((await stack.api<{ run_id: string }>("GET", `/v1/tool-calls/${callIdOf(second)}`)).body.run_id).toBe(call.body.run_id);
    const bob = rawMcp(
      { host: new URL(stack.orchestratorUrl).host, authorization: `Bearer ${stack.apiKeys.bob}`, "toolgate-run-id": call.body.run_id },
      initialize,
    );
    const refused = await bob;
    expect(refused.status).toBe(400);
    expect(JSON.parse(refused.body)).toMatchObject({ error: { data: { code: "RUN_NOT_FOUND" } } });
  });
});
