import { failure, findUnsafeText, success, unsafeText, type ResultEnvelope } from "@toolgate/contracts";
import { ToolRegistry } from "@toolgate/registry";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { contracts, searchSources } from "./__fixtures__/contracts.js";
import { exportTools, formatResults, importTools, parseToolCalls, PROVIDERS, type ParsedToolCall, type ProviderName } from "./index.js";

const tools = new Set(["search_sources", "save_note"]);
const ARGS = { query: "agents sdk", source_type: "official", limit: 3 };
const CALL_ID = "call_01KB0000000000000000000001";

/** One call in each provider's format, with the given id, name and arguments (text for OpenAI, object elsewhere). */
function payload(provider: ProviderName, calls: { id?: unknown; name?: unknown; args?: unknown }[]): unknown {
  switch (provider) {
    case "openai-responses":
      return { output: calls.map((c) => ({ type: "function_call", call_id: c.id, name: c.name, arguments: c.args })) };
    case "openai-chat":
      return {
        choices: [
          { message: { role: "assistant", tool_calls: calls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: c.args } })) } },
        ],
      };
    case "anthropic":
      return { content: calls.map((c) => ({ type: "tool_use", id: c.id, name: c.name, input: c.args })) };
    case "gemini":
      return { candidates: [{ content: { parts: calls.map((c) => ({ functionCall: { id: c.id, name: c.name, args: c.args } })) } }] };
    case "mcp":
      return calls.map((c) => ({ jsonrpc: "2.0", id: c.id, method: "tools/call", params: { name: c.name, arguments: c.args } }));
  }
}

const textArgs = (provider: ProviderName) => provider.startsWith("openai");
const args = (provider: ProviderName, value: unknown) => (textArgs(provider) ? JSON.stringify(value) : value);

describe.each(PROVIDERS)("%s: malformed payloads are typed errors, never exceptions", (provider) => {
  it("refuses a call without an id (Gemini generates one instead)", () => {
    const result = parseToolCalls(provider, payload(provider, [{ name: "search_sources", args: args(provider, ARGS) }]));
    if (provider === "gemini") expect(result).toMatchObject({ ok: true, calls: [{ id: "gemini_call_0", origin: { generatedId: true } }] });
    else expect(result).toMatchObject({ ok: false, error: { code: "MISSING_CALL_ID" } });
  });

  it("refuses two calls with one id in one response", () => {
    const call = { id: provider === "mcp" ? 5 : "c1", name: "search_sources", args: args(provider, ARGS) };
    expect(parseToolCalls(provider, payload(provider, [call, call]))).toMatchObject({ ok: false, error: { code: "DUPLICATE_CALL_ID" } });
  });

  it("refuses a call without a tool name", () => {
    expect(parseToolCalls(provider, payload(provider, [{ id: "c1", args: args(provider, ARGS) }]))).toMatchObject({
      ok: false,
      error: { code: "MISSING_TOOL_NAME" },
    });
  });

  it("handles arguments that are not a JSON object: a problem on the call (text), or a typed error (object)", () => {
    for (const bad of [[1, 2], "limit=3", 42, null]) {
      const result = parseToolCalls(provider, payload(provider, [{ id: "c1", name: "search_sources", args: textArgs(provider) ? JSON.stringify(bad) : bad }]));
      if (textArgs(provider)) expect(result).toMatchObject({ ok: true, calls: [{ problem: { code: "INVALID_ARGUMENTS" } }] });
      else if (provider === "gemini" && bad === null) expect(result).toMatchObject({ ok: true, calls: [{ argumentsJson: "{}" }] });
      else expect(result).toMatchObject({ ok: false, error: { code: "ARGUMENTS_NOT_OBJECT" } });
    }
    if (textArgs(provider)) {
      expect(parseToolCalls(provider, payload(provider, [{ id: "c1", name: "search_sources", args: '{"query":' }]))).toMatchObject({
        ok: true,
        calls: [{ argumentsJson: '{"query":', problem: { code: "INVALID_JSON" } }],
      });
      expect(parseToolCalls(provider, payload(provider, [{ id: "c1", name: "search_sources", args: { query: "x" } }]))).toMatchObject({
        ok: false,
        error: { code: "MALFORMED_PAYLOAD" },
      });
    }
  });

  it("marks a call to a tool that is not offered with UNKNOWN_TOOL, keeping it so the runtime answers it", () => {
    const result = parseToolCalls(provider, payload(provider, [{ id: "c1", name: "drop_database", args: args(provider, {}) }]), { tools });
    expect(result).toMatchObject({ ok: true, calls: [{ name: "drop_database", problem: { code: "UNKNOWN_TOOL" } }] });
    // Without a list of tools there is nothing to compare with.
    expect(parseToolCalls(provider, payload(provider, [{ id: "c1", name: "drop_database", args: args(provider, {}) }]))).toMatchObject({
      ok: true,
      calls: [{ name: "drop_database" }],
    });
  });

  it("refuses a NUL, a control character or an unpaired surrogate in a call id, a tool name or an argument key", () => {
    const bad = [
      { id: "a\u0000b", name: "search_sources", args: args(provider, ARGS) },
      { id: "c1", name: "search\u0000sources", args: args(provider, ARGS) },
      { id: "c1\n", name: "search_sources", args: args(provider, ARGS) },
      { id: "c1", name: "search_sources\ud800", args: args(provider, ARGS) },
      { id: "c1", name: "search_sources", args: args(provider, { ...ARGS, nested: { "qu\u0000ery": 1 } }) },
    ];
    for (const call of bad) {
      const result = parseToolCalls(provider, payload(provider, [call]));
      expect(result).toMatchObject({ ok: false, error: { code: "INVALID_CHARACTERS" } });
      // The message names the character; it never carries it.
      if (!result.ok) expect(result.error.message).toMatch(/^[\x20-\x7e]+$/);
    }
    if (textArgs(provider)) {
      const raw = parseToolCalls(provider, payload(provider, [{ id: "c1", name: "search_sources", args: '{"query":"a\u0000"}' }]));
      expect(raw).toMatchObject({ ok: false, error: { code: "INVALID_CHARACTERS", message: expect.stringContaining("arguments text") } });
    }
    // A NUL in an argument value is data: the call is parsed and its contract decides.
    expect(
      parseToolCalls(provider, payload(provider, [{ id: "c1", name: "search_sources", args: args(provider, { ...ARGS, query: "a\u0000b" }) }])),
    ).toMatchObject({
      ok: true,
    });
  });

  it("refuses payloads of the wrong shape", () => {
    for (const bad of [null, 42, "text", {}, { output: "x" }, [{ type: 5 }], { choices: [] }]) {
      const result = parseToolCalls(provider, bad);
      if (result.ok) expect(result.calls).toEqual([]);
      else expect(result.error.code).toMatch(/^[A-Z_]+$/);
    }
  });

  it("refuses results that do not answer the calls one to one", () => {
    const calls: ParsedToolCall[] = [
      { id: "a", name: "search_sources", argumentsJson: "{}" },
      { id: "b", name: "search_sources", argumentsJson: "{}" },
    ];
    const ok = success(CALL_ID, { items: [] });
    expect(formatResults(provider, calls, [{ id: "a", result: ok }])).toMatchObject({ ok: false, error: { code: "MISSING_RESULT" } });
    expect(
      formatResults(provider, calls, [
        { id: "a", result: ok },
        { id: "b", result: ok },
        { id: "z", result: ok },
      ]),
    ).toMatchObject({
      ok: false,
      error: { code: "UNEXPECTED_RESULT" },
    });
    expect(
      formatResults(provider, calls, [
        { id: "a", result: ok },
        { id: "a", result: ok },
      ]),
    ).toMatchObject({ ok: false, error: { code: "UNEXPECTED_RESULT" } });
    expect(
      formatResults(provider, calls, [
        { id: "a", result: ok },
        { id: "b", result: { ok: "yes" } as unknown as ResultEnvelope },
      ]),
    ).toMatchObject({
      ok: false,
      error: { code: "MALFORMED_RESULT" },
    });
  });
});

describe("openai-chat: choices that are not choices", () => {
  it("answers a typed MALFORMED_PAYLOAD for a choice without a message, instead of throwing", () => {
    for (const choice of [{ k0: { v: [0, "x"] } }, { message: null }, { message: "text" }]) {
      expect(parseToolCalls("openai-chat", { choices: [choice] })).toMatchObject({ ok: false, error: { code: "MALFORMED_PAYLOAD", pointer: "/choices/0" } });
    }
  });
});

describe("round trip at the library level: parse → registry → format", () => {
  const registry = ToolRegistry.from(contracts);

  it.each(PROVIDERS)("%s: the limit-50 call comes back as a failure under its own id, the valid one as a success", (provider) => {
    const parsed = parseToolCalls(
      provider,
      payload(provider, [
        { id: provider === "mcp" ? 11 : "ok-1", name: "search_sources", args: args(provider, ARGS) },
        { id: "bad-2", name: "search_sources", args: args(provider, { ...ARGS, limit: 50 }) },
      ]),
      { tools: registry },
    );
    if (!parsed.ok) throw new Error(parsed.error.message);
    const results = parsed.calls.map((call) => {
      const checked = registry.checkArguments(registry.get(call.name)!, call.argumentsJson);
      return {
        id: call.id,
        result: checked.ok ? success(CALL_ID, { items: [] }) : failure(CALL_ID, checked.code, checked.message, { details: { violations: checked.violations } }),
      };
    });
    const formatted = formatResults(provider, parsed.calls, results.reverse());
    if (!formatted.ok) throw new Error(formatted.error.message);
    const text = JSON.stringify(formatted.output);
    expect(text).toContain("INVALID_ARGUMENTS");
    expect(text).toContain("bad-2");
  });

  it("exports OpenAI tools non-strict when asked, with the schema as written", () => {
    const exported = exportTools("openai-chat", [searchSources], { openaiStrict: "never" });
    expect(exported).toMatchObject({ ok: true, tools: [{ function: { strict: false, parameters: searchSources.input_schema } }], notes: [] });
  });

  it("skips disabled contracts and refuses invalid ones", () => {
    expect(exportTools("anthropic", [{ ...searchSources, enabled: false }])).toEqual({ ok: true, tools: [], notes: [] });
    expect(exportTools("mcp", [{ ...searchSources, name: "Not A Name" }])).toMatchObject({ ok: false, error: { code: "INVALID_CONTRACT" } });
  });

  it("refuses a Gemini export of a recursive schema, which Gemini cannot express", () => {
    const recursive = {
      ...searchSources,
      input_schema: {
        type: "object",
        properties: { node: { $ref: "#/$defs/n" } },
        additionalProperties: false,
        $defs: { n: { type: "object", properties: { next: { $ref: "#/$defs/n" } } } },
      },
    };
    expect(exportTools("gemini", [recursive])).toMatchObject({ ok: false, error: { code: "INVALID_CONTRACT", message: expect.stringContaining("recursive") } });
  });

  it("imports Gemini declarations back into JSON Schema, and MCP annotations as hints", () => {
    const exported = exportTools("gemini", [searchSources]);
    if (!exported.ok) throw new Error(exported.error.message);
    const imported = importTools("gemini", [{ functionDeclarations: exported.tools }]);
    expect(imported).toMatchObject({
      ok: true,
      tools: [
        {
          name: "search_sources",
          input_schema: {
            type: "object",
            properties: {
              query: { type: "string", minLength: 3, maxLength: 256 },
              source_type: { type: "string", enum: ["official", "any"] },
              limit: { type: "integer", minimum: 1, maximum: 10 },
            },
            required: ["query", "source_type", "limit"],
          },
        },
      ],
    });
    const fromMcp = importTools("mcp", { tools: [{ name: "t", inputSchema: { type: "object" }, annotations: { readOnlyHint: true, openWorldHint: false } }] });
    expect(fromMcp).toMatchObject({
      ok: true,
      tools: [{ name: "tool_t", original_name: "t", description: "", input_schema: { type: "object" }, hints: { readOnly: true, openWorld: false } }],
    });
    // A server's read-only hint is kept, but the draft still treats the tool as a write until someone reviews it.
    expect(fromMcp.ok && fromMcp.tools[0]!.contract).toMatchObject({ side_effect: "write", aliases: ["t"] });
  });

  it("skips provider-specific tools on import and refuses malformed definitions", () => {
    expect(importTools("openai-responses", [{ type: "web_search" }, { type: "function", name: "f", parameters: null, strict: true }])).toMatchObject({
      ok: true,
      tools: [{ name: "tool_f", original_name: "f", input_schema: { type: "object", properties: {} } }],
    });
    expect(importTools("anthropic", [{ type: "bash_20250124", name: "bash" }])).toEqual({ ok: true, tools: [] });
    for (const provider of PROVIDERS) expect(importTools(provider, "not a list")).toMatchObject({ ok: false, error: { code: "MALFORMED_PAYLOAD" } });
  });
});

describe("property: random provider payloads never crash an adapter, and nothing unflagged is invalid", () => {
  const jsonish = fc.oneof(fc.jsonValue({ maxDepth: 3 }), fc.constant(undefined));
  const call = fc.record(
    {
      id: fc.oneof(
        fc.string({ maxLength: 6 }),
        fc.string({ unit: "binary", maxLength: 6 }),
        fc.integer({ min: -2, max: 3 }),
        fc.constant(null),
        fc.constant(""),
        fc.double(),
      ),
      name: fc.oneof(
        fc.constantFrom("search_sources", "save_note", "drop_database", "", "search_sources\u0000"),
        fc.string({ maxLength: 4 }),
        fc.string({ unit: "binary", maxLength: 4 }),
        fc.integer(),
      ),
      args: fc.oneof(
        jsonish,
        fc.json({ maxDepth: 3 }),
        fc.constant(ARGS),
        fc.constant(JSON.stringify(ARGS)),
        fc.string({ unit: "binary", maxLength: 20 }),
        fc.dictionary(fc.string({ maxLength: 4 }), jsonish, { maxKeys: 4 }),
        fc.dictionary(fc.string({ unit: "binary", maxLength: 4 }), jsonish, { maxKeys: 4 }),
      ),
    },
    { requiredKeys: [] },
  );
  const payloads = fc.oneof(
    fc.tuple(fc.constantFrom(...PROVIDERS), fc.array(call, { maxLength: 4 })).map(([provider, calls]) => [provider, payload(provider, calls)] as const),
    fc.tuple(fc.constantFrom(...PROVIDERS), fc.anything({ maxDepth: 4 })),
  );

  it("parse: no exception; every call has a unique id and a name; an unflagged call is a known tool with a JSON object", () => {
    fc.assert(
      fc.property(payloads, ([provider, input]) => {
        const result = parseToolCalls(provider, input, { tools });
        if (!result.ok) {
          expect(result.error.message.length).toBeGreaterThan(0);
          return;
        }
        const ids = result.calls.map((c) => c.id);
        expect(new Set(ids).size).toBe(ids.length);
        for (const c of result.calls) {
          expect(c.id.length).toBeGreaterThan(0);
          expect(c.name.length).toBeGreaterThan(0);
          // What is accepted can be recorded and proposed: safe ids, names and keys, no raw NUL or lone surrogate.
          expect(unsafeText(c.id, "identifier")).toBeUndefined();
          expect(unsafeText(c.name, "identifier")).toBeUndefined();
          expect(unsafeText(c.argumentsJson, "text")).toBeUndefined();
          if (c.problem === undefined) expect(findUnsafeText(JSON.parse(c.argumentsJson), "none")).toBeUndefined();
          if (c.problem === undefined) {
            expect(tools.has(c.name)).toBe(true);
            const value: unknown = JSON.parse(c.argumentsJson);
            expect(typeof value === "object" && value !== null && !Array.isArray(value)).toBe(true);
          }
        }
      }),
      { numRuns: 2_000 },
    );
  });

  it("format: no exception for any results; a success answers every call exactly once", () => {
    const envelope = fc.oneof(
      fc.constant(success(CALL_ID, { items: [] })),
      fc.constant(failure(CALL_ID, "INVALID_ARGUMENTS", "no")),
      fc.jsonValue({ maxDepth: 2 }),
    ) as fc.Arbitrary<ResultEnvelope>;
    const calls = fc
      .uniqueArray(fc.constantFrom("a", "b", "c", "d"), { maxLength: 4 })
      .map((ids) => ids.map((id) => ({ id, name: "search_sources", argumentsJson: "{}" })));
    fc.assert(
      fc.property(
        fc.constantFrom(...PROVIDERS),
        calls,
        fc.array(fc.record({ id: fc.constantFrom("a", "b", "c", "d", "e"), result: envelope }), { maxLength: 5 }),
        (provider, cs, rs) => {
          const result = formatResults(provider, cs, rs);
          if (result.ok) {
            expect(result.output).toHaveLength(cs.length);
            expect(new Set(rs.map((r) => r.id))).toEqual(new Set(cs.map((c) => c.id)));
          }
        },
      ),
      { numRuns: 1_000 },
    );
  });

  it("export and import: no exception for any definitions or contracts", () => {
    fc.assert(
      fc.property(fc.constantFrom(...PROVIDERS), fc.anything({ maxDepth: 4 }), (provider, definitions) => {
        expect(typeof importTools(provider, definitions).ok).toBe("boolean");
        const asContract = { ...searchSources, input_schema: { type: "object", properties: { x: definitions }, additionalProperties: false } };
        expect(typeof exportTools(provider, [asContract]).ok).toBe("boolean");
      }),
      { numRuns: 1_000 },
    );
  });
});
