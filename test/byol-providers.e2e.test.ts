import type Anthropic from "@anthropic-ai/sdk";
import type OpenAI from "openai";
import { Stack, testInfra } from "@toolgate/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// Bring your own loop, in the provider's own dialect: the host posts the model's response as the provider
// returned it and gets the provider-native tool results back once every call has ended.
let stack: Stack;

beforeAll(async () => {
  const infra = testInfra();
  stack = await Stack.start({
    natsUrl: infra.natsUrl,
    mongoUrl: infra.mongoUrl,
    env: { executor: { EXECUTOR_FAULTS: JSON.stringify({ slowSearch: { pattern: "unhurried", delayMs: 1_000 } }) } },
  });
});

afterAll(async () => {
  await stack?.stop();
});

const search = (query: string, limit: number) => JSON.stringify({ query, source_type: "official", limit });

describe("provider-native bring-your-own-loop", () => {
  it("OpenAI Responses: function_call items in, function_call_output items out, each under its own call id", async () => {
    const response = {
      id: "resp_1",
      object: "response",
      output: [
        {
          type: "function_call",
          id: "fc_1",
          call_id: "call_ok",
          name: "search_sources",
          arguments: search("OpenAI Agents SDK sessions", 2),
          status: "completed",
        },
        { type: "function_call", id: "fc_2", call_id: "call_bad", name: "search_sources", arguments: search("sessions", 50), status: "completed" },
      ],
    } as unknown as OpenAI.Responses.Response;
    const { status, body } = await stack.api<{ complete: boolean; results: OpenAI.Responses.ResponseInputItem.FunctionCallOutput[] }>(
      "POST",
      "/v1/providers/openai-responses/tool-calls",
      { response, wait_ms: 30_000 },
    );
    expect(status).toBe(200);
    expect(body.complete).toBe(true);
    expect(body.results.map((r) => [r.type, r.call_id])).toEqual([
      ["function_call_output", "call_ok"],
      ["function_call_output", "call_bad"],
    ]);
    // Results go back wrapped as data with their provenance.
    expect(JSON.parse(body.results[0]!.output as string)).toMatchObject({
      toolgate_observation: { tool: "search_sources", contract_version: "1.0.0", untrusted: true },
      result: { ok: true },
    });
    expect(JSON.parse(body.results[1]!.output as string)).toMatchObject({ result: { ok: false, error: { code: "INVALID_ARGUMENTS" } } });
  });

  it("Anthropic: tool_use blocks in, tool_result blocks with is_error out; pending until the slow call ends", async () => {
    const message = {
      id: "msg_1",
      type: "message",
      role: "assistant",
      content: [{ type: "tool_use", id: "toolu_1", name: "search_sources", input: { query: "unhurried sessions", source_type: "official", limit: 1 } }],
      stop_reason: "tool_use",
    } as unknown as Anthropic.Message;
    const first = await stack.api<{ complete: boolean; calls: { id: string; call_id: string }[]; pending: { status: string }[] }>(
      "POST",
      "/v1/providers/anthropic/tool-calls",
      { response: message, wait_ms: 0 },
    );
    expect(first.status).toBe(202);
    expect(first.body.pending).toEqual([{ id: "toolu_1", call_id: first.body.calls[0]!.call_id, status: "running" }]);
    const later = await stack.api<{ complete: boolean; results: Anthropic.ToolResultBlockParam[] }>(
      "GET",
      `/v1/providers/anthropic/results?call_ids=${first.body.calls[0]!.call_id}&wait_ms=30000`,
    );
    expect(later.status).toBe(200);
    expect(later.body.results).toMatchObject([{ type: "tool_result", tool_use_id: "toolu_1", is_error: false }]);
  });

  it("answers a read of calls that already ended at once, and a long poll of one still running when it ends", async () => {
    const message = {
      id: "msg_2",
      type: "message",
      role: "assistant",
      content: [{ type: "tool_use", id: "toolu_2", name: "search_sources", input: { query: "unhurried reads", source_type: "official", limit: 1 } }],
      stop_reason: "tool_use",
    } as unknown as Anthropic.Message;
    const first = await stack.api<{ calls: { call_id: string }[] }>("POST", "/v1/providers/anthropic/tool-calls", { response: message, wait_ms: 0 });
    const callId = first.body.calls[0]!.call_id;
    // The slow search takes a second: a long poll returns with its outcome, well before its own 30 s.
    const polled = await stack.api<{ status: string; result?: { ok: boolean } }>("GET", `/v1/tool-calls/${callId}?wait_ms=30000`);
    expect(polled.status).toBe(200);
    expect(polled.body).toMatchObject({ status: "completed", result: { ok: true } });
    // Ended before the read: both routes answer at once, however long they were told to wait.
    const started = Date.now();
    const [again, results] = await Promise.all([
      stack.api<{ status: string }>("GET", `/v1/tool-calls/${callId}?wait_ms=30000`),
      stack.api<{ results: Anthropic.ToolResultBlockParam[] }>("GET", `/v1/providers/anthropic/results?call_ids=${callId}&wait_ms=30000`),
    ]);
    expect(again.body.status).toBe("completed");
    expect(results.status).toBe(200);
    expect(results.body.results).toMatchObject([{ type: "tool_result", tool_use_id: "toolu_2", is_error: false }]);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect((await stack.api("GET", `/v1/tool-calls/${callId}?wait_ms=-1`)).status).toBe(400);
  });

  it("refuses a malformed provider payload with a typed error, and runs none of its calls", async () => {
    const call = { id: "call_dup", type: "function", function: { name: "search_sources", arguments: search("sessions", 1) } };
    const completion = {
      id: "c1",
      object: "chat.completion",
      choices: [{ index: 0, message: { role: "assistant", content: null, tool_calls: [call, call] } }],
    };
    const { status, body } = await stack.api<{ error: { code: string } }>("POST", "/v1/providers/openai-chat/tool-calls", { response: completion });
    expect(status).toBe(400);
    expect(body.error.code).toBe("DUPLICATE_CALL_ID");
  });

  it("exports the tools in a provider's format", async () => {
    const { body } = await stack.api<{ tools: { name: string; strict?: boolean }[] }>("GET", "/v1/tools?format=openai-responses");
    expect(body.tools.map((t) => t.name).sort()).toEqual(["fetch_document", "save_evidence", "search_sources"]);
  });
});
