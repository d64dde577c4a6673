import { describe, expect, it } from "vitest";
import * as anthropic from "./__fixtures__/anthropic.js";
import { contracts, results } from "./__fixtures__/contracts.js";
import * as gemini from "./__fixtures__/gemini.js";
import * as mcp from "./__fixtures__/mcp.js";
import * as openaiChat from "./__fixtures__/openai-chat.js";
import * as openaiResponses from "./__fixtures__/openai-responses.js";
import { exportTools, formatResults, importTools, parseToolCalls, PROVIDERS, type ProviderName } from "./index.js";

// Golden fixtures per provider: the inputs are typed by the provider's SDK (a format change fails the build),
// the outputs are what Toolgate must produce (a behaviour change fails here).
const FIXTURES = {
  "openai-responses": openaiResponses,
  "openai-chat": openaiChat,
  anthropic,
  gemini,
  mcp,
} as const satisfies Record<ProviderName, unknown>;

const tools = new Set(["search_sources", "save_note"]);

/** The provider's id each formatted item answers. */
function answeredIds(provider: ProviderName, output: unknown[]): string[] {
  return output.map((item) => {
    const o = item as { call_id?: string; tool_call_id?: string; tool_use_id?: string; id?: string | number; functionResponse?: { id?: string } };
    switch (provider) {
      case "openai-responses":
        return String(o.call_id);
      case "openai-chat":
        return String(o.tool_call_id);
      case "anthropic":
        return String(o.tool_use_id);
      case "gemini":
        return o.functionResponse?.id ?? "(none)";
      case "mcp":
        return String(o.id);
    }
  });
}

describe.each(PROVIDERS)("%s golden fixtures", (provider) => {
  const fixture = FIXTURES[provider];

  it("parses the SDK-typed response into the golden calls", () => {
    expect(parseToolCalls(provider, fixture.response, { tools })).toEqual({ ok: true, calls: fixture.calls });
  });

  it("formats results given in another order into the golden output, one per call under its own id", () => {
    const formatted = formatResults(provider, fixture.calls, results(fixture.ids));
    expect(formatted).toEqual({ ok: true, output: fixture.formatted });
    if (!formatted.ok) return;
    const expectedIds = provider === "gemini" ? [fixture.ids[0], fixture.ids[1], "(none)"] : [...fixture.ids];
    expect(answeredIds(provider, formatted.output)).toEqual(expectedIds);
  });

  it("exports the contracts into the golden tool definitions and notes", () => {
    expect(exportTools(provider, contracts)).toEqual({ ok: true, tools: fixture.tools, notes: fixture.notes });
  });

  it("imports its own exported definitions back to the same names and descriptions", () => {
    const imported = importTools(provider, fixture.tools);
    if (!imported.ok) throw new Error(imported.error.message);
    expect(imported.tools.map((t) => [t.name, t.description])).toEqual(fixture.tools.map((t) => [contractName(t), contractDescription(t)]));
  });
});

function contractName(tool: object): string {
  return (tool as { name?: string }).name ?? (tool as { function: { name: string } }).function.name;
}

function contractDescription(tool: object): string {
  return (tool as { description?: string }).description ?? (tool as { function: { description: string } }).function.description;
}

describe("failures are flagged per provider in the provider's own terms", () => {
  it("Anthropic marks failed tool_result blocks with is_error; MCP with isError", () => {
    expect(anthropic.formatted.map((b) => b.is_error)).toEqual([false, true, true]);
    expect(mcp.formatted.map((r) => r.result.isError)).toEqual([false, true, true]);
    expect(mcp.formatted[0]!.result.structuredContent).toEqual((results(mcp.ids)[1]!.result as { data: unknown }).data);
    // The JSON-RPC id keeps its type: 7 stays a number.
    expect(mcp.formatted.map((r) => r.id)).toEqual([7, "req-8", "req-9"]);
  });

  it("Gemini puts data under response.output and the typed error under response.error", () => {
    expect(gemini.formatted.map((p) => Object.keys(p.functionResponse.response))).toEqual([["output"], ["error"], ["error"]]);
    expect(gemini.formatted[1]!.functionResponse.response).toMatchObject({ error: { code: "INVALID_ARGUMENTS", retryable: false } });
  });

  it("OpenAI sends the observation as JSON text with ok: false and the error code", () => {
    expect(JSON.parse(openaiResponses.formatted[1]!.output)).toMatchObject({ ok: false, error: { code: "INVALID_ARGUMENTS" } });
    expect(JSON.parse(openaiChat.formatted[0]!.content)).toMatchObject({ ok: true, data: { items: [{ title: "Sessions" }] } });
  });
});
