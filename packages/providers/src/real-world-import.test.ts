import { readFileSync } from "node:fs";
import { newCallId, success } from "@toolgate/contracts";
import { ToolRegistry, type ToolContractInput } from "@toolgate/registry";
import { describe, expect, it } from "vitest";
import {
  exportTools,
  formatResults,
  importTools,
  isSafeToolName,
  parseToolCalls,
  PROVIDER_NAME_RULES,
  PROVIDERS,
  toOpenAIStrict,
  type ImportedTool,
} from "./index.js";

// Twenty-one function definitions in the shape public function-calling benchmarks collect from users: open
// objects (no additionalProperties anywhere), nested objects and arrays of objects, optional fields, and names
// no provider or subject accepts as they are (uber.ride, GetWeather, spaces, `>`, `*`, too long, case twins).
const DEFINITIONS = JSON.parse(readFileSync(new URL("./__fixtures__/real-world-openai-tools.json", import.meta.url), "utf8")) as {
  type: "function";
  function: { name: string; description: string; parameters: Record<string, unknown> };
}[];

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Schema = Record<string, unknown>;

/** A value the schema accepts, with every optional property present so that every nested object is reached. */
function validValue(schema: Schema): Json {
  if (Array.isArray(schema.enum)) return schema.enum[0] as Json;
  switch (schema.type) {
    case "object": {
      const properties = (schema.properties ?? {}) as Record<string, Schema>;
      return Object.fromEntries(Object.entries(properties).map(([key, sub]) => [key, validValue(sub)]));
    }
    case "array":
      return [validValue(schema.items as Schema)];
    case "integer":
      return typeof schema.minimum === "number" ? schema.minimum : 2;
    case "number":
      return 2.5;
    case "boolean":
      return true;
    default:
      return "a value";
  }
}

/** JSON pointers of every object in a value, the root included. */
function objectPointers(value: Json, pointer = ""): string[] {
  if (Array.isArray(value)) return value.flatMap((item, i) => objectPointers(item, `${pointer}/${i}`));
  if (value === null || typeof value !== "object") return [];
  return [pointer, ...Object.entries(value).flatMap(([key, sub]) => objectPointers(sub, `${pointer}/${key}`))];
}

/** A deep copy of `value` with an extra field in the object at `pointer`. */
function withExtraField(value: Json, pointer: string, field: string): Json {
  const copy = structuredClone(value);
  let target: Json = copy;
  for (const token of pointer.split("/").slice(1)) target = (target as Record<string, Json>)[token]!;
  (target as Record<string, Json>)[field] = true;
  return copy;
}

function imported(): ImportedTool[] {
  const result = importTools("openai-chat", DEFINITIONS);
  if (!result.ok) throw new Error(result.error.message);
  return result.tools;
}

/** The drafts as someone would complete them enough to compile: the input schemas stay exactly as imported. */
function registryOf(tools: readonly ImportedTool[]): ToolRegistry {
  return ToolRegistry.from(tools.map((t) => t.contract));
}

describe("importing real-world OpenAI function definitions", () => {
  const tools = imported();
  const byOriginal = new Map(tools.map((t) => [t.original_name, t]));
  const registry = registryOf(tools);

  it("gives every tool a distinct, stable safe name and keeps the original as an alias", () => {
    expect(tools).toHaveLength(DEFINITIONS.length);
    const names = tools.map((t) => t.name);
    expect(new Set(names).size).toBe(names.length);
    for (const tool of tools) {
      expect(isSafeToolName(tool.name), tool.name).toBe(true);
      for (const provider of PROVIDERS) expect(PROVIDER_NAME_RULES[provider].test(tool.name), `${provider}: ${tool.name}`).toBe(true);
      expect(tool.contract.aliases ?? []).toEqual(tool.name === tool.original_name ? [] : [tool.original_name]);
    }
    expect(byOriginal.get("uber.ride")!.name).toBe("uber_ride");
    expect(byOriginal.get("Translate Text")!.name).toBe("translate_text");
    expect(byOriginal.get("search>results*")!.name).toBe("search_results");
    expect(byOriginal.get("fetchUserProfile")!.name).toBe("fetch_user_profile");
    expect(byOriginal.get("get_current_weather")!.name).toBe("get_current_weather");
    // A name that is already safe keeps it; its case twin gets a suffix. Two unsafe twins both get one.
    expect(byOriginal.get("get_stock_price")!.name).toBe("get_stock_price");
    expect(byOriginal.get("Get_Stock_Price")!.name).toMatch(/^get_stock_price_[b-z]{7}$/);
    expect(byOriginal.get("GetWeather")!.name).toMatch(/^get_weather_[b-z]{7}$/);
    expect(byOriginal.get("get weather")!.name).toMatch(/^get_weather_[b-z]{7}$/);
    const long = byOriginal.get("get_the_current_stock_price_of_a_publicly_traded_company_given_its_ticker_symbol_and_exchange")!;
    expect(long.name.length).toBeLessThanOrEqual(64);
    expect(long.name).toMatch(/^get_the_current_stock_price_of_a_publicly_traded_company_[b-z]{7}$/);
    // Deterministic in the set, whatever its order.
    const again = importTools("openai-chat", [...DEFINITIONS].reverse());
    if (!again.ok) throw new Error(again.error.message);
    expect(new Map(again.tools.map((t) => [t.original_name, t.name]))).toEqual(new Map(tools.map((t) => [t.original_name, t.name])));
  });

  it("drafts an unknown side effect as a write of medium risk and lists what the linter wants completed", () => {
    for (const tool of tools) {
      expect(tool.contract).toMatchObject({ side_effect: "write", risk: "medium", approval: "always", idempotency: { kind: "keyed" } });
      expect(tool.assumed.map((a) => a.pointer)).toEqual(expect.arrayContaining(["/side_effect", "/risk", "/owner", "/output_schema"]));
      const rules = new Set(tool.findings.map((f) => f.rule));
      // Open objects and unbounded strings are what these definitions leave to complete.
      expect(rules.has("object-not-closed"), tool.name).toBe(true);
      expect(rules.has("string-unbounded") || rules.has("array-unbounded") || tool.name === "math_factorial", tool.name).toBe(true);
    }
    expect(byOriginal.get("book_flight")!.findings).toEqual(
      expect.arrayContaining([expect.objectContaining({ rule: "object-not-closed", pointer: "/input_schema/properties/passenger/properties/contact" })]),
    );
  });

  it("accepts valid objects and refuses every unknown field, at the top and nested, with its pointer", () => {
    const nested: string[] = [];
    for (const tool of tools) {
      const compiled = registry.get(tool.name)!;
      const valid = validValue(tool.input_schema);
      const accepted = registry.checkArguments(compiled, JSON.stringify(valid));
      expect(accepted, tool.name).toMatchObject({ ok: true });
      const pointers = objectPointers(valid);
      expect(pointers.length).toBeGreaterThan(0);
      for (const pointer of pointers) {
        const checked = registry.checkArguments(compiled, JSON.stringify(withExtraField(valid, pointer, "force")));
        expect(checked.ok, `${tool.name} ${pointer}/force`).toBe(false);
        if (checked.ok) continue;
        expect(checked.code).toBe("INVALID_ARGUMENTS");
        expect(checked.violations).toContainEqual(expect.objectContaining({ pointer: `${pointer}/force`, message: "is not an allowed property" }));
        if (pointer !== "") nested.push(`${tool.name}${pointer}`);
      }
    }
    expect(nested).toEqual(
      expect.arrayContaining([
        "restaurant_search/location",
        "restaurant_search/filters",
        "book_flight/passenger",
        "book_flight/passenger/contact",
        "hotel_booking_reserve/stay",
        "create_calendar_event/attendees/0",
        "order_pizza/delivery",
        "order_pizza/delivery/address",
      ]),
    );
  });

  it("resolves a call by the original name to the tool, and answers it under that name", () => {
    const calls = tools.map((tool, i) => ({ id: `call_${i}`, name: tool.original_name, args: validValue(tool.input_schema) }));
    const completion = {
      choices: [
        {
          message: {
            role: "assistant",
            tool_calls: calls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: JSON.stringify(c.args) } })),
          },
        },
      ],
    };
    const parsed = parseToolCalls("openai-chat", completion, { tools: registry });
    if (!parsed.ok) throw new Error(parsed.error.message);
    for (const [i, call] of parsed.calls.entries()) {
      const tool = tools[i]!;
      expect(call.problem, tool.original_name).toBeUndefined();
      expect(call.name).toBe(tool.original_name);
      expect(call.tool).toBe(tool.name === tool.original_name ? undefined : tool.name);
      const compiled = registry.get(call.name)!;
      expect(compiled.contract.name).toBe(tool.name);
      expect(registry.checkArguments(compiled, call.argumentsJson)).toMatchObject({ ok: true });
    }
    const results = parsed.calls.map((c) => ({ id: c.id, result: success(newCallId(), { done: true }) }));
    const chat = formatResults("openai-chat", parsed.calls, results);
    expect(chat.ok && chat.output.map((m) => m.tool_call_id)).toEqual(calls.map((c) => c.id));

    // Gemini answers by name: the name the model called.
    const gemini = parseToolCalls(
      "gemini",
      { candidates: [{ content: { role: "model", parts: calls.map((c) => ({ functionCall: { id: c.id, name: c.name, args: c.args } })) } }] },
      { tools: registry },
    );
    if (!gemini.ok) throw new Error(gemini.error.message);
    expect(gemini.calls.every((c) => c.problem === undefined)).toBe(true);
    const answered = formatResults("gemini", gemini.calls, results);
    expect(answered.ok && answered.output.map((p) => p.functionResponse?.name)).toEqual(calls.map((c) => c.name));

    const anthropic = parseToolCalls(
      "anthropic",
      { content: calls.map((c) => ({ type: "tool_use", id: c.id, name: c.name, input: c.args })) },
      { tools: registry },
    );
    expect(anthropic.ok && anthropic.calls.map((c) => [c.problem, registry.get(c.name)?.contract.name])).toEqual(tools.map((t) => [undefined, t.name]));

    // A name that is no tool's name nor alias is still unknown.
    const unknown = parseToolCalls(
      "openai-chat",
      { tool_calls: [{ id: "x", type: "function", function: { name: "uber_ride_v2", arguments: "{}" } }] },
      { tools: registry },
    );
    expect(unknown.ok && unknown.calls[0]!.problem?.code).toBe("UNKNOWN_TOOL");
  });

  it("exports names and schemas every provider accepts, shown closed as the registry enforces them", () => {
    const contracts = tools.map((t) => t.contract);
    for (const provider of PROVIDERS) {
      const exported = exportTools(provider, contracts);
      if (!exported.ok) throw new Error(`${provider}: ${exported.error.message}`);
      const names = exported.tools.map((t) => ("function" in t ? t.function.name : t.name));
      expect(names, provider).toEqual(tools.map((t) => t.name));
      for (const name of names) expect(PROVIDER_NAME_RULES[provider].test(name!), `${provider}: ${name}`).toBe(true);
    }

    const chat = exportTools("openai-chat", contracts);
    if (!chat.ok) throw new Error(chat.error.message);
    const strict = chat.tools.filter((t) => t.function.strict === true);
    for (const tool of chat.tools) {
      const parameters = tool.function.parameters!;
      assertClosed(parameters, tool.function.name);
      if (tool.function.strict === true) {
        // A strict tool's parameters are already in the strict subset: converting them again changes nothing.
        expect(toOpenAIStrict(parameters), tool.function.name).toEqual({ ok: true, schema: parameters, dropped: [] });
      } else {
        // Sent non-strict only because a property is optional, never because an object is open.
        expect(chat.notes.find((n) => n.tool === tool.function.name)?.message).toMatch(/optional \(strict mode requires every property\)/);
      }
    }
    // Every tool whose properties are all required fits strict mode, nested objects included.
    expect(strict.map((t) => t.function.name)).toEqual(
      expect.arrayContaining(["uber_ride", "math_factorial", "get_current_weather", "spotify_play", "currency_converter", "hotel_booking_reserve"]),
    );

    const responses = exportTools("openai-responses", contracts);
    if (!responses.ok) throw new Error(responses.error.message);
    expect(responses.tools.map((t) => t.strict)).toEqual(chat.tools.map((t) => t.function.strict));

    // Anthropic takes the schema as JSON Schema: it is the enforced schema, so the registry refuses what it refuses.
    const anthropic = exportTools("anthropic", contracts);
    if (!anthropic.ok) throw new Error(anthropic.error.message);
    for (const [i, tool] of anthropic.tools.entries()) {
      expect(tool.input_schema.type).toBe("object");
      assertClosed(tool.input_schema, tool.name);
      const asExported = ToolRegistry.from([{ ...(contracts[i] as ToolContractInput), input_schema: tool.input_schema }]);
      const compiled = asExported.get(tool.name)!;
      const valid = validValue(tools[i]!.input_schema);
      expect(asExported.checkArguments(compiled, JSON.stringify(valid)).ok).toBe(true);
      expect(asExported.checkArguments(compiled, JSON.stringify({ ...(valid as object), force: true })).ok).toBe(false);
    }

    const gemini = exportTools("gemini", contracts);
    if (!gemini.ok) throw new Error(gemini.error.message);
    for (const declaration of gemini.tools) assertGeminiSchema(declaration.parameters as Schema, declaration.name!);
  });
});

/** Every object schema in `schema` states `additionalProperties: false`. */
function assertClosed(schema: Schema, where: string, pointer = ""): void {
  if (schema.type === "object" || "properties" in schema) expect(schema.additionalProperties, `${where} ${pointer || "/"}`).toBe(false);
  for (const [key, sub] of Object.entries((schema.properties ?? {}) as Record<string, Schema>)) assertClosed(sub, where, `${pointer}/properties/${key}`);
  if (typeof schema.items === "object") assertClosed(schema.items as Schema, where, `${pointer}/items`);
}

/** Gemini's schema: its own keywords only, upper-case types, string enums, bounds as strings, nothing of JSON Schema's objects. */
const GEMINI_KEYS = new Set([
  "type",
  "description",
  "title",
  "format",
  "pattern",
  "nullable",
  "enum",
  "default",
  "minimum",
  "maximum",
  "minLength",
  "maxLength",
  "minItems",
  "maxItems",
  "minProperties",
  "maxProperties",
  "required",
  "properties",
  "propertyOrdering",
  "items",
  "anyOf",
]);

function assertGeminiSchema(schema: Schema, where: string, pointer = ""): void {
  for (const key of Object.keys(schema)) expect(GEMINI_KEYS.has(key), `${where} ${pointer}/${key}`).toBe(true);
  expect(["STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT", undefined]).toContain(schema.type);
  if (Array.isArray(schema.enum)) expect(schema.enum.every((v) => typeof v === "string")).toBe(true);
  for (const key of ["minLength", "maxLength", "minItems", "maxItems"]) if (key in schema) expect(typeof schema[key]).toBe("string");
  for (const [key, sub] of Object.entries((schema.properties ?? {}) as Record<string, Schema>)) assertGeminiSchema(sub, where, `${pointer}/properties/${key}`);
  if (typeof schema.items === "object") assertGeminiSchema(schema.items as Schema, where, `${pointer}/items`);
}
