import { Stack, testInfra } from "@toolgate/testkit";
import { MongoClient } from "mongodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
// The e2e package does not depend on @toolgate/providers yet; its built entry is imported by path until it does.
import {
  formatResults,
  parseToolCalls,
  type AnthropicMessage,
  type CallResult,
  type ChatCompletion,
  type GeminiPart,
  type GeminiResponse,
  type McpToolCallRequest,
  type McpToolCallResponse,
  type OpenAIChatToolMessage,
  type OpenAIFunctionCallOutput,
  type OpenAIResponse,
  type ProviderName,
  type ToolResultBlockParam,
} from "@toolgate/providers";

// Every provider's round trip through the four real services: a model response typed by the provider's own SDK
// is parsed, its calls go through POST /v1/tool-calls (policy, executor, audit as processes), and the results
// come back in the provider's shape, each under the provider's call id.
const TASK = "task_providers";
const C04 = { query: "OpenAI Agents SDK state management official documentation", source_type: "official", limit: 3 };
const LIMIT_50 = { ...C04, limit: 50 };
const FORCE = { ...C04, force: true };
const TOOLS = new Set(["search_sources", "fetch_document", "save_evidence"]);

let stack: Stack;
let mongo: MongoClient;

beforeAll(async () => {
  const infra = testInfra();
  stack = await Stack.start({ natsUrl: infra.natsUrl, mongoUrl: infra.mongoUrl });
  mongo = await new MongoClient(infra.mongoUrl).connect();
});

afterAll(async () => {
  await stack?.stop();
  await mongo?.db(`${stack.name}_runtime`).dropDatabase();
  await mongo?.db(`${stack.name}_tools`).dropDatabase();
  await mongo?.close();
});

interface SubmitResponse {
  run_id: string;
  results: { id: string; call_id: string; status: string; result?: CallResult["result"] }[];
}

/** Parses the payload, runs its calls through the services, and formats the results back. */
async function roundTrip<P extends ProviderName>(provider: P, payload: unknown) {
  const parsed = parseToolCalls(provider, payload, { tools: TOOLS });
  if (!parsed.ok) throw new Error(`${provider}: ${parsed.error.code} ${parsed.error.message}`);
  const calls = parsed.calls.map((c) => ({ id: c.id, name: c.name, arguments: c.argumentsJson }));
  const submitted = await stack.api<SubmitResponse>("POST", "/v1/tool-calls", { context: { task_id: TASK }, calls, wait_ms: 30_000 });
  expect(submitted.status).toBe(200);
  expect(submitted.body.results.map((r) => r.status)).toEqual(parsed.calls.map(() => "done"));
  // Each result is the runtime's terminal outcome of exactly that call.
  for (const r of submitted.body.results) expect(r.result?.call_id).toBe(r.call_id);
  const results: CallResult[] = submitted.body.results.map((r) => ({ id: r.id, result: r.result! }));
  const formatted = formatResults(provider, parsed.calls, [...results].reverse());
  if (!formatted.ok) throw new Error(`${provider}: ${formatted.error.code} ${formatted.error.message}`);
  return { calls: parsed.calls, output: formatted.output };
}

/** The observation a provider carries as JSON text. */
const observed = (text: unknown) =>
  JSON.parse(String(text)) as { ok: boolean; data?: { items?: unknown[] }; error?: { code: string; details?: { violations?: { pointer: string }[] } } };

function expectSeedOutcomes(observations: ReturnType<typeof observed>[]): void {
  const [valid, limit50, force, unknown] = observations;
  expect(valid).toMatchObject({ ok: true });
  expect(valid!.data!.items!.length).toBeGreaterThan(0);
  expect(limit50).toMatchObject({ ok: false, error: { code: "INVALID_ARGUMENTS", details: { violations: [{ pointer: "/limit" }] } } });
  expect(force).toMatchObject({ ok: false, error: { code: "INVALID_ARGUMENTS", details: { violations: [{ pointer: "/force" }] } } });
  expect(unknown).toMatchObject({ ok: false, error: { code: "UNKNOWN_TOOL" } });
}

describe("provider round trips through the real services", () => {
  it("OpenAI Responses: function_call items in, function_call_output items out under each call_id", async () => {
    const response = {
      id: "resp_1",
      object: "response",
      created_at: 1_764_000_000,
      model: "gpt-5.1",
      status: "completed",
      error: null,
      incomplete_details: null,
      instructions: null,
      metadata: {},
      parallel_tool_calls: true,
      temperature: 1,
      top_p: 1,
      tool_choice: "auto",
      tools: [],
      output_text: "",
      output: [
        { type: "function_call", call_id: "call_r1", name: "search_sources", arguments: JSON.stringify(C04) },
        { type: "function_call", call_id: "call_r2", name: "search_sources", arguments: JSON.stringify(LIMIT_50) },
        { type: "function_call", call_id: "call_r3", name: "search_sources", arguments: JSON.stringify(FORCE) },
        { type: "function_call", call_id: "call_r4", name: "drop_database", arguments: "{}" },
      ],
    } satisfies OpenAIResponse;
    const { calls, output } = await roundTrip("openai-responses", response);
    expect(calls[3]!.problem?.code).toBe("UNKNOWN_TOOL");
    const items: OpenAIFunctionCallOutput[] = output;
    expect(items.map((i) => [i.type, i.call_id])).toEqual(response.output.map((o) => ["function_call_output", o.call_id]));
    expectSeedOutcomes(items.map((i) => observed(i.output)));
  });

  it("OpenAI Chat Completions: tool_calls in, role: tool messages out under each tool_call_id", async () => {
    const completion = {
      id: "chatcmpl-1",
      object: "chat.completion",
      created: 1_764_000_000,
      model: "gpt-4.1",
      choices: [
        {
          index: 0,
          finish_reason: "tool_calls",
          logprobs: null,
          message: {
            role: "assistant",
            content: null,
            refusal: null,
            tool_calls: [
              { id: "call_c1", type: "function", function: { name: "search_sources", arguments: JSON.stringify(C04) } },
              { id: "call_c2", type: "function", function: { name: "search_sources", arguments: JSON.stringify(LIMIT_50) } },
              { id: "call_c3", type: "function", function: { name: "search_sources", arguments: JSON.stringify(FORCE) } },
              { id: "call_c4", type: "function", function: { name: "drop_database", arguments: "{}" } },
            ],
          },
        },
      ],
    } satisfies ChatCompletion;
    const { output } = await roundTrip("openai-chat", completion);
    const messages: OpenAIChatToolMessage[] = output;
    expect(messages.map((m) => [m.role, m.tool_call_id])).toEqual([
      ["tool", "call_c1"],
      ["tool", "call_c2"],
      ["tool", "call_c3"],
      ["tool", "call_c4"],
    ]);
    expectSeedOutcomes(messages.map((m) => observed(m.content)));
  });

  it("Anthropic Messages: tool_use blocks in, tool_result blocks out with is_error on failures", async () => {
    const message = {
      id: "msg_1",
      type: "message",
      role: "assistant",
      model: "claude-sonnet-4-5",
      container: null,
      diagnostics: null,
      stop_details: null,
      stop_reason: "tool_use",
      stop_sequence: null,
      usage: {
        input_tokens: 10,
        output_tokens: 10,
        cache_creation_input_tokens: null,
        cache_read_input_tokens: null,
        cache_creation: null,
        server_tool_use: null,
        service_tier: null,
        inference_geo: null,
        output_tokens_details: null,
        speed: null,
      },
      content: [
        { type: "text", text: "Searching.", citations: null },
        { type: "tool_use", id: "toolu_a1", name: "search_sources", input: C04, caller: { type: "direct" } },
        { type: "tool_use", id: "toolu_a2", name: "search_sources", input: LIMIT_50, caller: { type: "direct" } },
        { type: "tool_use", id: "toolu_a3", name: "search_sources", input: FORCE, caller: { type: "direct" } },
        { type: "tool_use", id: "toolu_a4", name: "drop_database", input: {}, caller: { type: "direct" } },
      ],
    } satisfies AnthropicMessage;
    const { output } = await roundTrip("anthropic", message);
    const blocks: ToolResultBlockParam[] = output;
    expect(blocks.map((b) => [b.type, b.tool_use_id, b.is_error])).toEqual([
      ["tool_result", "toolu_a1", false],
      ["tool_result", "toolu_a2", true],
      ["tool_result", "toolu_a3", true],
      ["tool_result", "toolu_a4", true],
    ]);
    expectSeedOutcomes(blocks.map((b) => observed(b.content)));
  });

  it("Gemini: functionCall parts in (one without an id), functionResponse parts out with output or error", async () => {
    const response = {
      responseId: "r-1",
      modelVersion: "gemini-2.5-pro",
      candidates: [
        {
          index: 0,
          content: {
            role: "model",
            parts: [
              { functionCall: { id: "g1", name: "search_sources", args: C04 } },
              { functionCall: { id: "g2", name: "search_sources", args: LIMIT_50 } },
              { functionCall: { name: "search_sources", args: FORCE } },
              { functionCall: { id: "g4", name: "drop_database", args: {} } },
            ],
          },
        },
      ],
    } satisfies GeminiResponse;
    const { calls, output } = await roundTrip("gemini", response);
    expect(calls.map((c) => c.id)).toEqual(["g1", "g2", "gemini_call_2", "g4"]);
    const parts: GeminiPart[] = output;
    expect(parts.map((p) => [p.functionResponse?.id, p.functionResponse?.name])).toEqual([
      ["g1", "search_sources"],
      ["g2", "search_sources"],
      [undefined, "search_sources"],
      ["g4", "drop_database"],
    ]);
    const responses = parts.map((p) => p.functionResponse!.response!);
    expect(responses[0]).toMatchObject({ output: { items: expect.any(Array) } });
    expectSeedOutcomes(
      responses.map((r) =>
        "output" in r
          ? { ok: true, data: r.output as { items: unknown[] } }
          : { ok: false, error: r.error as { code: string; details?: { violations?: { pointer: string }[] } } },
      ),
    );
  });

  it("MCP: tools/call requests in, JSON-RPC results out with isError and structuredContent, ids keeping their type", async () => {
    const requests = [
      { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "search_sources", arguments: C04 } },
      { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "search_sources", arguments: LIMIT_50 } },
      { jsonrpc: "2.0", id: "three", method: "tools/call", params: { name: "search_sources", arguments: FORCE } },
      { jsonrpc: "2.0", id: 4, method: "tools/call", params: { name: "drop_database" } },
    ] satisfies McpToolCallRequest[];
    const { output } = await roundTrip("mcp", requests);
    const responses: McpToolCallResponse[] = output;
    expect(responses.map((r) => [r.id, r.result.isError])).toEqual([
      [1, false],
      [2, true],
      ["three", true],
      [4, true],
    ]);
    expect(responses[0]!.result.structuredContent).toMatchObject({ items: expect.any(Array) });
    const texts = responses.map((r) => (r.result.content[0] as { text: string }).text);
    expectSeedOutcomes([{ ok: true, data: responses[0]!.result.structuredContent as { items: unknown[] } }, ...texts.slice(1).map(observed)]);
  });
});
