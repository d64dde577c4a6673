import { Stack, callEvents, testInfra, waitFor, type AuditedEvent } from "@toolgate/testkit";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// Bad bytes at the front doors never crash a request or lose a call: an id, a name or an argument key that the
// store or the event stream could not carry is refused with a typed 400, and whatever is accepted ends once.

let stack: Stack;

beforeAll(async () => {
  const infra = testInfra();
  stack = await Stack.start({ natsUrl: infra.natsUrl, mongoUrl: infra.mongoUrl });
});

afterAll(async () => {
  await stack?.stop();
});

const ARGS = { query: "agents sdk", source_type: "any", limit: 3 };
const TERMINAL = new Set(["rejected", "denied", "completed", "outcome_unknown"]);

type Answer = { status: number; body: unknown };

/** Sends `body` (JSON, or raw bytes as they are) to the orchestrator as alice. */
async function post(path: string, body: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  const response = await fetch(`${stack.orchestratorUrl}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${stack.apiKeys.alice}`, "content-type": "application/json", ...headers },
    body: body instanceof Uint8Array ? body : JSON.stringify(body),
  });
  const text = await response.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // Not JSON: kept as text for the assertion message.
  }
  return { status: response.status, body: parsed };
}

/** A one-call model response in a provider's own format (OpenAI carries its arguments as text). */
function providerResponse(provider: string, id: string, name: string, args: unknown): unknown {
  switch (provider) {
    case "openai-responses":
      return { output: [{ type: "function_call", call_id: id, name, arguments: typeof args === "string" ? args : JSON.stringify(args) }] };
    case "openai-chat":
      return {
        choices: [
          {
            message: {
              role: "assistant",
              tool_calls: [{ id, type: "function", function: { name, arguments: typeof args === "string" ? args : JSON.stringify(args) } }],
            },
          },
        ],
      };
    case "anthropic":
      return { content: [{ type: "tool_use", id, name, input: args }] };
    default:
      return { candidates: [{ content: { parts: [{ functionCall: { id, name, args } }] } }] };
  }
}

async function mcpCall(name: string, args: unknown): Promise<Answer> {
  return post(
    "/mcp",
    { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name, arguments: args } },
    { accept: "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18" },
  );
}

/**
 * The runtime call ids an accepted submission names: a provider answer maps them in `calls` (its `results` are
 * the provider's own, under the provider's ids), a host answer lists them in `results`.
 */
function acceptedCallIds(answer: Answer): string[] {
  if (answer.status !== 200 && answer.status !== 202) return [];
  const body = answer.body as { results?: { call_id?: string }[]; calls?: { call_id?: string }[] };
  return (body.calls ?? body.results ?? []).map((c) => c.call_id).filter((id): id is string => typeof id === "string");
}

/** Waits until `callId` has ended and audit holds its whole trail; returns the trail. */
async function endedTrail(callId: string): Promise<AuditedEvent["event"][]> {
  const result = await waitFor(
    async () => {
      const { status, body } = await stack.api<{ status: string }>("GET", `/v1/tool-calls/${callId}`);
      return status === 200 && body.status !== "pending" ? body : undefined;
    },
    { timeoutMs: 60_000, intervalMs: 200, description: `an outcome for ${callId}` },
  );
  expect(TERMINAL.has(result.status)).toBe(true);
  return waitFor(
    async () => {
      const events = await callEvents(stack, callId);
      return events.some((e) => e.type === "result_attached") ? events : undefined;
    },
    { timeoutMs: 60_000, intervalMs: 200, description: `audit holding the trail of ${callId}` },
  );
}

/** Every call of `callIds` ended with exactly one terminal event in its audit trail; the orchestrator logged no error. */
async function expectEachEndedOnce(callIds: string[]): Promise<void> {
  for (const callId of callIds) {
    const trail = await endedTrail(callId);
    expect(
      trail.filter((e) => TERMINAL.has(e.type)).map((e) => e.type),
      callId,
    ).toHaveLength(1);
  }
  expect(orchestratorErrors()).toEqual([]);
}

function expectTypedRefusal(answer: Answer, pointer?: string): void {
  expect(answer.status, JSON.stringify(answer.body)).toBe(400);
  const error = (answer.body as { error: { code: string; message: string; details?: { pointer?: string } } }).error;
  expect(error.code).toBe("INVALID_CHARACTERS");
  // The message and pointer name the character; they never carry it.
  expect(error.message).toMatch(/^[\x20-\x7e]+$/);
  if (pointer !== undefined) expect(error.details?.pointer).toBe(pointer);
}

/** What the orchestrator logged at error level: a request that failed inside it rather than at its edge. */
const orchestratorErrors = () =>
  stack
    .process("orchestrator")
    .logs()
    .filter((l) => l.level === "error");

describe("unsafe characters at the front doors", () => {
  it("refuses a NUL in an Anthropic tool_use id, tool name or input key with a typed 400", async () => {
    const path = "/v1/providers/anthropic/tool-calls";
    expectTypedRefusal(await post(path, { response: providerResponse("anthropic", "a\u0000b", "search_sources", ARGS) }), "/content/0");
    expectTypedRefusal(await post(path, { response: providerResponse("anthropic", "toolu_1", "search\u0000sources", ARGS) }), "/content/0");
    expectTypedRefusal(await post(path, { response: providerResponse("anthropic", "toolu_2", "search_sources", { ...ARGS, "qu\u0000ery": "x" }) }));
  });

  it("refuses them in every provider dialect, in OpenAI's argument text too", async () => {
    for (const provider of ["openai-responses", "openai-chat", "gemini"]) {
      const path = `/v1/providers/${provider}/tool-calls`;
      expectTypedRefusal(await post(path, { response: providerResponse(provider, "c\u0007", "search_sources", ARGS) }));
      expectTypedRefusal(await post(path, { response: providerResponse(provider, "c1", "search_sources\ud800", ARGS) }));
      expectTypedRefusal(await post(path, { response: providerResponse(provider, "c1", "search_sources", { ...ARGS, "k\u0000": 1 }) }));
    }
    // A raw NUL in the argument text is refused; escaped in a key it is refused as the key.
    const text = (args: string) => ({ response: providerResponse("openai-responses", "c1", "search_sources", args) });
    expectTypedRefusal(await post("/v1/providers/openai-responses/tool-calls", text('{"query":"a\u0000"}')));
    expectTypedRefusal(await post("/v1/providers/openai-responses/tool-calls", text('{"qu\\u0000ery":"x"}')));
  });

  it("refuses them in host calls, runs and MCP tools/call", async () => {
    const calls = (call: Record<string, unknown>) => ({ calls: [{ id: "h1", name: "search_sources", arguments: ARGS, ...call }] });
    expectTypedRefusal(await post("/v1/tool-calls", calls({ id: "a\u0000b" })), "/calls/0/id");
    expectTypedRefusal(await post("/v1/tool-calls", calls({ id: "x\ud800" })), "/calls/0/id");
    expectTypedRefusal(await post("/v1/tool-calls", calls({ name: "search_sources\n" })), "/calls/0/name");
    expectTypedRefusal(await post("/v1/tool-calls", calls({ arguments: { ...ARGS, deep: [{ "a\u0000": 1 }] } })), "/calls/0/arguments/deep/0/a\\u0000");
    expectTypedRefusal(await post("/v1/tool-calls", calls({ arguments: '{"query":"\u0000"}' })), "/calls/0/arguments");
    expectTypedRefusal(await post("/v1/runs", { model: "scripted:c04\u0000", input: "q" }), "/model");
    expectTypedRefusal(await post("/v1/runs", { model: "scripted:c04", input: "q\u0000" }), "/input");
    for (const [name, args] of [
      ["search\u0000sources", ARGS],
      ["search_sources", { ...ARGS, "qu\u0000ery": "x" }],
    ] as const) {
      const answer = await mcpCall(name, args);
      expect(answer.status).toBe(200);
      expect(answer.body).toMatchObject({ error: { code: -32602, data: { code: "INVALID_CHARACTERS" } } });
    }
    // Nothing above reached the store: no request failed inside the orchestrator.
    expect(orchestratorErrors()).toEqual([]);
  });

  it("takes a NUL or a lone surrogate in an argument value as data: each call ends once, with the contract's verdict", async () => {
    const nul = await post("/v1/tool-calls", { calls: [{ id: "v1", name: "search_sources", arguments: { ...ARGS, query: "a\u0000b" } }] });
    const surrogate = await post("/v1/tool-calls", { calls: [{ id: "v2", name: "search_sources", arguments: { ...ARGS, query: "x\ud800" } }] });
    for (const answer of [nul, surrogate]) expect([200, 202]).toContain(answer.status);
    for (const callId of [...acceptedCallIds(nul), ...acceptedCallIds(surrogate)]) {
      const trail = await endedTrail(callId);
      expect(trail.filter((e) => TERMINAL.has(e.type))).toHaveLength(1);
    }
    const surrogateTrail = await callEvents(stack, acceptedCallIds(surrogate)[0]!);
    expect(surrogateTrail.find((e) => e.type === "rejected")?.payload).toMatchObject({ result: { error: { code: "INVALID_JSON" } } });
  });
});

describe("property: random bytes at the HTTP endpoints", () => {
  // Strings of any UTF-16 code units (NULs, controls, lone surrogates), and names mostly of real tools.
  const anyString = fc.oneof(fc.string({ unit: "binary", maxLength: 12 }), fc.string({ unit: "binary-ascii", maxLength: 12 }), fc.string({ maxLength: 8 }));
  const toolName = fc.oneof(fc.constantFrom("search_sources", "fetch_document", "save_evidence"), anyString);
  const value = fc.oneof(anyString, fc.integer(), fc.boolean(), fc.constant(null));
  const args = fc.oneof(
    fc.constant<Record<string, unknown>>(ARGS),
    fc.record({ query: anyString, source_type: fc.constant("any"), limit: fc.integer({ min: 0, max: 12 }) }),
    fc.dictionary(anyString, value, { maxKeys: 4 }),
  );
  const provider = fc.constantFrom("openai-responses", "openai-chat", "anthropic", "gemini");
  const request = fc.oneof(
    fc.record({ kind: fc.constant("host" as const), id: anyString, name: toolName, args: fc.oneof(args, anyString) }),
    fc.record({ kind: fc.constant("provider" as const), provider, id: anyString, name: toolName, args }),
    fc.record({ kind: fc.constant("run" as const), model: fc.oneof(fc.constant("scripted:c04-no-match"), anyString), input: anyString }),
    fc.record({ kind: fc.constant("mcp" as const), name: toolName, args }),
    fc.record({
      kind: fc.constant("bytes" as const),
      path: fc.constantFrom("/v1/tool-calls", "/v1/runs", "/v1/providers/anthropic/tool-calls", "/mcp"),
      bytes: fc.uint8Array({ maxLength: 64 }),
    }),
    fc.record({ kind: fc.constant("read" as const), segment: anyString }),
  );

  it("never answers 5xx, and every accepted call gets exactly one terminal outcome", async () => {
    const accepted: string[] = [];
    await fc.assert(
      fc.asyncProperty(request, async (r) => {
        let answer: Answer;
        switch (r.kind) {
          case "host":
            answer = await post("/v1/tool-calls", { calls: [{ id: r.id, name: r.name, arguments: r.args }] });
            break;
          case "provider":
            answer = await post(`/v1/providers/${r.provider}/tool-calls`, { response: providerResponse(r.provider, r.id, r.name, r.args) });
            break;
          case "run":
            answer = await post("/v1/runs", { model: r.model, input: r.input });
            break;
          case "mcp":
            answer = await mcpCall(r.name, r.args);
            break;
          case "bytes":
            answer = await post(r.path, r.bytes);
            break;
          case "read": {
            const response = await fetch(`${stack.orchestratorUrl}/v1/tool-calls/${encodeURIComponent(r.segment)}`, {
              headers: { authorization: `Bearer ${stack.apiKeys.alice}` },
            });
            answer = { status: response.status, body: await response.text() };
          }
        }
        expect(answer.status, `${JSON.stringify(r)} → ${JSON.stringify(answer.body)}`).toBeLessThan(500);
        accepted.push(...acceptedCallIds(answer));
      }),
      { numRuns: 120 },
    );
    expect(accepted.length).toBeGreaterThan(0);
    await expectEachEndedOnce(accepted);
  });
});

/** JSON text of `depth` levels of nesting (arrays and objects in turn): built as text, as no JSON.stringify could. */
function nestedText(depth: number): string {
  const open: string[] = [];
  const close: string[] = [];
  for (let i = 0; i < depth; i++) {
    open.push(i % 2 === 0 ? "[" : '{"a":');
    close.push(i % 2 === 0 ? "]" : "}");
  }
  return `${open.join("")}1${close.reverse().join("")}`;
}

/** `body` as JSON text with the string `"$DEEP"` replaced by `deep` (JSON text) wherever it occurs. */
const withDeep = (body: unknown, deep: string): Uint8Array => new TextEncoder().encode(JSON.stringify(body).replaceAll('"$DEEP"', deep));

describe("deep and wide JSON at the front doors", () => {
  it("refuses 10,000-deep arguments at every endpoint with a typed 400 (or ends the call INVALID_JSON), and logs it", async () => {
    const deep = nestedText(10_000);
    // OpenAI carries arguments as text: the deep value inside a JSON string.
    const deepArgsText = JSON.stringify(`{"query":"agents sdk","source_type":"any","limit":3,"deep":${deep}}`);
    const answers: [string, Answer][] = [
      [
        "host object",
        await post("/v1/tool-calls", withDeep({ calls: [{ id: "deep-1", name: "search_sources", arguments: { ...ARGS, deep: "$DEEP" } }] }, deep)),
      ],
      ["host text", await post("/v1/tool-calls", withDeep({ calls: [{ id: "deep-2", name: "search_sources", arguments: "$DEEP" }] }, deepArgsText))],
      ["run context", await post("/v1/runs", withDeep({ model: "scripted:c04-no-match", input: "hi", context: { deep: "$DEEP" } }, deep))],
      [
        "mcp",
        await post(
          "/mcp",
          withDeep({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "search_sources", arguments: { ...ARGS, deep: "$DEEP" } } }, deep),
          {
            accept: "application/json, text/event-stream",
            "mcp-protocol-version": "2025-06-18",
          },
        ),
      ],
    ];
    for (const provider of ["anthropic", "gemini"]) {
      answers.push([
        provider,
        await post(
          `/v1/providers/${provider}/tool-calls`,
          withDeep({ response: providerResponse(provider, "deep-3", "search_sources", { ...ARGS, deep: "$DEEP" }) }, deep),
        ),
      ]);
    }
    for (const provider of ["openai-responses", "openai-chat"]) {
      answers.push([
        provider,
        await post(
          `/v1/providers/${provider}/tool-calls`,
          withDeep({ response: providerResponse(provider, "deep-4", "search_sources", "$DEEP") }, deepArgsText),
        ),
      ]);
    }
    const refused = answers.filter(([, answer]) => answer.status === 400);
    for (const [where, answer] of answers) {
      if (answer.status === 400) {
        expect((answer.body as { error: unknown }).error, where).toMatchObject({ code: "INVALID_REQUEST", details: { max_depth: 128 } });
        continue;
      }
      // Deep arguments inside a string reach the contract, which refuses them; the call ends once.
      const [callId] = acceptedCallIds(answer);
      expect(callId, `${where}: ${JSON.stringify(answer.body).slice(0, 300)}`).toBeDefined();
      const trail = await endedTrail(callId!);
      const terminal = trail.filter((e) => TERMINAL.has(e.type));
      expect(
        terminal.map((e) => e.type),
        where,
      ).toEqual(["rejected"]);
      expect((terminal[0]!.payload as { result: { error: { code: string } } }).result.error.code, where).toMatch(/^INVALID_(ARGUMENTS|JSON)$/);
    }
    // Every body refused before it was parsed (objects nested in the body itself), each with a log line.
    expect(refused.map(([where]) => where)).toEqual(["host object", "run context", "mcp", "anthropic", "gemini"]);
    const logged = stack
      .process("orchestrator")
      .logs()
      .filter((l) => l.msg === "request refused: JSON nested too deep");
    expect(logged.length).toBeGreaterThanOrEqual(refused.length);
    expect(orchestratorErrors()).toEqual([]);
  });

  it("property: deep and wide JSON at every endpoint never answers 5xx, and every accepted call ends once", async () => {
    // Depths around the limits (a contract's 16, the body's 128) and far beyond; widths up to a few thousand.
    const depth = fc.oneof(fc.integer({ min: 1, max: 20 }), fc.integer({ min: 120, max: 136 }), fc.integer({ min: 1_000, max: 20_000 }));
    const deepValue = depth.map((d) => nestedText(d));
    const wideValue = fc
      .integer({ min: 1, max: 5_000 })
      .map((n) => (n % 2 === 0 ? `[${Array(n).fill("1").join(",")}]` : `{${Array.from({ length: n }, (_, i) => `"k${i}":${i}`).join(",")}}`));
    const value = fc.oneof(deepValue, wideValue);
    const where = fc.constantFrom("host object", "host text", "run context", "mcp", "anthropic", "gemini", "openai-responses", "openai-chat");
    const accepted: string[] = [];
    await fc.assert(
      fc.asyncProperty(where, value, async (at, json) => {
        const args = { ...ARGS, deep: "$DEEP" };
        const asText = JSON.stringify(`{"query":"agents sdk","source_type":"any","limit":3,"deep":${json}}`);
        let answer: Answer;
        switch (at) {
          case "host object":
            answer = await post("/v1/tool-calls", withDeep({ calls: [{ id: "p", name: "search_sources", arguments: args }] }, json));
            break;
          case "host text":
            answer = await post("/v1/tool-calls", withDeep({ calls: [{ id: "p", name: "search_sources", arguments: "$DEEP" }] }, asText));
            break;
          case "run context":
            answer = await post("/v1/runs", withDeep({ model: "scripted:c04-no-match", input: "hi", context: { deep: "$DEEP" } }, json));
            break;
          case "mcp":
            answer = await post("/mcp", withDeep({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "search_sources", arguments: args } }, json), {
              accept: "application/json, text/event-stream",
              "mcp-protocol-version": "2025-06-18",
            });
            break;
          case "anthropic":
          case "gemini":
            answer = await post(`/v1/providers/${at}/tool-calls`, withDeep({ response: providerResponse(at, "p", "search_sources", args) }, json));
            break;
          default:
            answer = await post(`/v1/providers/${at}/tool-calls`, withDeep({ response: providerResponse(at, "p", "search_sources", "$DEEP") }, asText));
        }
        expect(answer.status, `${at}, ${json.length} bytes → ${JSON.stringify(answer.body).slice(0, 300)}`).toBeLessThan(500);
        accepted.push(...acceptedCallIds(answer));
      }),
      { numRuns: 60 },
    );
    expect(accepted.length).toBeGreaterThan(0);
    await expectEachEndedOnce(accepted);
  });
});
