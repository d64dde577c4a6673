import { canonicalHash } from "@toolgate/contracts";
import { researchContracts, searchSourcesContract } from "@toolgate/research-tools";
import { Ajv2020 } from "ajv/dist/2020.js";
import formatsModule from "ajv-formats";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { ToolContractInput } from "./contract.js";
import { ContractCompiler, ContractError, ToolRegistry, type ArgumentCheck } from "./registry.js";

const registry = ToolRegistry.from(researchContracts);
const search = registry.get("search_sources")!;
/** The C04 call of seed 000. */
const C04 = { query: "OpenAI Agents SDK state management official documentation", source_type: "official", limit: 3 };

function rejected(check: ArgumentCheck) {
  if (check.ok) throw new Error(`expected a rejection, got ${check.canonical}`);
  return check;
}

/** A contract with a default, a nested object and an array, to exercise normalization and the derived limits. */
const planTrip: ToolContractInput = {
  name: "plan_trip",
  version: "1.0.0",
  description: "Plans a trip. Use it when the user asks for an itinerary; do not use it to book anything.",
  owner: "tests",
  input_schema: {
    type: "object",
    properties: {
      city: { type: "string", maxLength: 40 },
      days: { type: "integer", minimum: 1, maximum: 14, default: 3 },
      stops: { type: "array", maxItems: 4, items: { type: "string", maxLength: 20 } },
      options: { type: "object", properties: { pace: { type: "string", enum: ["slow", "fast"] } }, additionalProperties: false },
    },
    required: ["city"],
    additionalProperties: false,
  },
  output_schema: { type: "object" },
  side_effect: "none",
  risk: "low",
  timeout_ms: 1000,
  idempotency: { kind: "natural" },
  limits: { max_argument_bytes: 2048, max_result_bytes: 1024, max_depth: 3 },
};

describe("structural layer on the seeds' examples", () => {
  it("accepts the C04 call and returns its RFC 8785 form and hash", () => {
    const check = registry.checkArguments(search, JSON.stringify(C04));
    expect(check).toEqual({
      ok: true,
      arguments: C04,
      canonical: '{"limit":3,"query":"OpenAI Agents SDK state management official documentation","source_type":"official"}',
      argsHash: canonicalHash(C04),
    });
    // Key order and number spelling do not change the normalized form.
    const reordered = registry.checkArguments(search, `{"source_type":"official","limit":3.0,"query":${JSON.stringify(C04.query)}}`);
    expect(reordered).toMatchObject({ ok: true, argsHash: canonicalHash(C04) });
  });

  it("refuses limit: 50 with INVALID_ARGUMENTS at /limit and a message a model can act on", () => {
    const check = rejected(registry.checkArguments(search, JSON.stringify({ ...C04, limit: 50 })));
    expect(check.code).toBe("INVALID_ARGUMENTS");
    expect(check.violations).toEqual([{ pointer: "/limit", message: "must be <= 10", keyword: "maximum" }]);
    expect(check.message).toContain("/limit must be <= 10");
  });

  it("refuses an unknown force: true, naming the property in the pointer", () => {
    const check = rejected(registry.checkArguments(search, JSON.stringify({ ...C04, force: true })));
    expect(check).toMatchObject({ code: "INVALID_ARGUMENTS", violations: [{ pointer: "/force", keyword: "additionalProperties" }] });
  });

  it("never coerces types", () => {
    for (const limit of ["3", true, null, 3.5, [3]]) {
      expect(rejected(registry.checkArguments(search, JSON.stringify({ ...C04, limit })))).toMatchObject({
        code: "INVALID_ARGUMENTS",
        violations: [{ pointer: "/limit" }],
      });
    }
    expect(rejected(registry.checkArguments(search, JSON.stringify({ ...C04, query: 12345 })))).toMatchObject({ violations: [{ pointer: "/query" }] });
  });

  it("reports every missing and unknown field at once", () => {
    const check = rejected(registry.checkArguments(search, JSON.stringify({ query: C04.query, force: true, dry_run: false })));
    expect(check.violations.map((v) => v.pointer).sort()).toEqual(["/dry_run", "/force", "/limit", "/source_type"]);
  });
});

describe("structural layer: what the JSON text itself may not do", () => {
  it("refuses text that is not JSON as INVALID_JSON, and JSON that is not an object as INVALID_ARGUMENTS", () => {
    expect(rejected(registry.checkArguments(search, "{query:"))).toMatchObject({ code: "INVALID_JSON" });
    expect(rejected(registry.checkArguments(search, "[1,2"))).toMatchObject({ code: "INVALID_JSON" });
    for (const text of ["[1,2]", '"query"', "null", "3"]) {
      expect(rejected(registry.checkArguments(search, text))).toMatchObject({ code: "INVALID_ARGUMENTS", message: "arguments must be a JSON object" });
    }
  });

  it("refuses duplicate keys as INVALID_JSON instead of keeping the last one", () => {
    // JSON.parse would quietly run limit 3; another parser would run limit 50.
    const check = rejected(registry.checkArguments(search, '{"query":"agents sdk","source_type":"official","limit":50,"limit":3}'));
    expect(check).toMatchObject({ code: "INVALID_JSON", violations: [{ pointer: "/limit", keyword: "duplicateKey" }] });
  });

  it("refuses lone surrogates with a typed error", () => {
    const check = rejected(registry.checkArguments(search, '{"query":"agents \\ud800 sdk","source_type":"official","limit":3}'));
    expect(check).toMatchObject({ code: "INVALID_JSON", violations: [{ pointer: "/query", keyword: "loneSurrogate" }] });
  });

  it("keeps __proto__ and constructor harmless: refused as unknown fields, no prototype touched", () => {
    for (const key of ["__proto__", "constructor", "prototype", "toString", "hasOwnProperty"]) {
      const check = rejected(registry.checkArguments(search, `{${JSON.stringify(key)}:{"polluted":true},"query":"agents sdk","source_type":"any","limit":3}`));
      expect(check.violations).toEqual([{ pointer: `/${key}`, message: "is not an allowed property", keyword: "additionalProperties" }]);
    }
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it("does not let inherited properties satisfy `required` or `properties`", () => {
    const contract = {
      ...planTrip,
      name: "inherited_names",
      input_schema: {
        type: "object",
        properties: { constructor: { type: "string", maxLength: 8 }, toString: { type: "string", maxLength: 8 } },
        required: ["constructor", "toString"],
        additionalProperties: false,
      },
    };
    const own = ToolRegistry.from([contract]);
    const tool = own.get("inherited_names")!;
    expect(rejected(own.checkArguments(tool, "{}")).violations.map((v) => v.pointer)).toEqual(["/constructor", "/toString"]);
    expect(own.checkArguments(tool, '{"constructor":"a","toString":"b"}')).toMatchObject({ ok: true });
  });

  it("checks the byte limit before anything else", () => {
    const check = rejected(registry.checkArguments(search, JSON.stringify({ ...C04, query: "x".repeat(5_000) })));
    expect(check).toMatchObject({ code: "INVALID_ARGUMENTS", violations: [{ pointer: "", keyword: "maxBytes" }] });
    // Over the limit even when the text is not JSON at all: the size is refused first.
    expect(rejected(registry.checkArguments(search, "{".repeat(5_000)))).toMatchObject({ violations: [{ keyword: "maxBytes" }] });
  });

  it("stops at the depth, string and array bounds while parsing, with pointers", () => {
    const trips = ToolRegistry.from([planTrip]);
    const tool = trips.get("plan_trip")!;
    expect(rejected(trips.checkArguments(tool, '{"city":"Oslo","options":{"pace":{"x":{"y":1}}}}'))).toMatchObject({
      code: "INVALID_ARGUMENTS",
      violations: [{ pointer: "/options/pace/x", keyword: "maxDepth" }],
    });
    // The longest string the schema accepts anywhere is 40 characters; the array bound is 4 items.
    expect(rejected(trips.checkArguments(tool, JSON.stringify({ city: "x".repeat(41) })))).toMatchObject({
      violations: [{ pointer: "/city", keyword: "maxLength" }],
    });
    expect(rejected(trips.checkArguments(tool, `{"city":"Oslo","stops":["a","b","c","d","e",${"0,".repeat(300)}0]}`))).toMatchObject({
      violations: [{ pointer: "/stops", keyword: "maxItems" }],
    });
    // Below the parse bounds, the schema's own bounds apply, with ajv's message.
    expect(rejected(trips.checkArguments(tool, JSON.stringify({ city: "Oslo", stops: ["x".repeat(21)] })))).toMatchObject({
      violations: [{ pointer: "/stops/0", keyword: "maxLength" }],
    });
  });

  it("applies defaults and hashes the normalized arguments", () => {
    const trips = ToolRegistry.from([planTrip]);
    const check = trips.checkArguments(trips.get("plan_trip")!, '{"city":"Oslo"}');
    expect(check).toEqual({
      ok: true,
      arguments: { city: "Oslo", days: 3 },
      canonical: '{"city":"Oslo","days":3}',
      argsHash: canonicalHash({ city: "Oslo", days: 3 }),
    });
  });
});

describe("versions by content hash", () => {
  const v2: ToolContractInput = {
    ...searchSourcesContract,
    version: "1.1.0",
    input_schema: {
      ...searchSourcesContract.input_schema,
      properties: { ...(searchSourcesContract.input_schema.properties as object), limit: { type: "integer", minimum: 1, maximum: 20 } },
    },
  };

  it("keeps older versions addressable by hash and validates a call against exactly its version", () => {
    const both = ToolRegistry.from([v2], { retained: [searchSourcesContract] });
    const current = both.get("search_sources")!;
    const old = both.getByHash(search.hash)!;
    expect(current.ref.version).toBe("1.1.0");
    expect(old.ref.version).toBe("1.0.0");
    expect(both.list().map((t) => t.ref.version)).toEqual(["1.1.0"]);
    const limit15 = JSON.stringify({ ...C04, limit: 15 });
    expect(both.checkArguments(current, limit15).ok).toBe(true);
    expect(both.checkArguments(old, limit15)).toMatchObject({ ok: false, violations: [{ pointer: "/limit", message: "must be <= 10" }] });
  });

  it("refuses to validate against a tool it does not hold (a programmer error)", () => {
    const other = ToolRegistry.from([v2]);
    expect(() => other.checkArguments(search, JSON.stringify(C04))).toThrow(ContractError);
    expect(() => ToolRegistry.fromCompiled([{ ...search }])).toThrow(ContractError);
  });

  it("refuses two current versions of one name, and compiles a contract once per content hash", () => {
    expect(() => ToolRegistry.from([searchSourcesContract, v2])).toThrow(/duplicate tool name/);
    const compiler = new ContractCompiler();
    expect(compiler.compile(searchSourcesContract)).toBe(compiler.compile({ ...searchSourcesContract }));
  });
});

describe("property: no crash, no invalid argument accepted", () => {
  const addFormats = formatsModule.default;
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  const oracleSchema = ajv.compile(searchSourcesContract.input_schema);

  /** The independent verdict: JSON.parse, then the schema as written, then the I-JSON rules. */
  function oracleAccepts(text: string): boolean {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      return false;
    }
    return oracleSchema(value) && !/\\u[dD][89abAB]/.test(text) && Buffer.byteLength(text) <= 4096;
  }

  /**
   * An unknown key, present in one case of six: each one alone makes the arguments invalid, so with three of
   * them about half the cases still have none and the valid side of the boundary is well sampled (with one
   * in two, 1,500 runs held only ~48 valid cases, sometimes fewer than 30).
   */
  const rarely = <T>(arbitrary: fc.Arbitrary<T>) => fc.oneof({ arbitrary: fc.constant(undefined), weight: 5 }, { arbitrary, weight: 1 });

  /** Arguments near the boundaries of search_sources, as JSON text (built by hand so `__proto__` can be a key). */
  const nearlyValid = fc
    .tuple(
      fc.option(
        fc.oneof(
          { arbitrary: fc.string({ unit: "binary", minLength: 3, maxLength: 260 }), weight: 4 },
          fc.constantFrom("ab", "abc", "x".repeat(256), "x".repeat(257)),
          fc.integer(),
        ),
        { nil: undefined, freq: 8 },
      ),
      fc.option(fc.oneof({ arbitrary: fc.constantFrom("official", "any"), weight: 4 }, fc.constantFrom("docs", "", 1, null)), { nil: undefined, freq: 8 }),
      fc.option(
        fc.oneof({ arbitrary: fc.integer({ min: 1, max: 10 }), weight: 3 }, fc.integer({ min: -2, max: 60 }), fc.constantFrom("3", 3.5, true, null, 1e21)),
        {
          nil: undefined,
          freq: 8,
        },
      ),
      rarely(fc.boolean()),
      rarely(fc.constant({ polluted: true })),
      rarely(fc.string()),
    )
    .map(([query, source_type, limit, force, proto, ctor]) => {
      const entries = Object.entries({ query, source_type, limit, force, ["__proto__"]: proto, constructor: ctor });
      return `{${entries
        .filter(([, v]) => v !== undefined)
        .map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`)
        .join(",")}}`;
    });

  it("accepts exactly what an independent validator accepts, for near-valid arguments", () => {
    let accepted = 0;
    fc.assert(
      fc.property(nearlyValid, (text) => {
        const check = registry.checkArguments(search, text);
        expect(check.ok).toBe(oracleAccepts(text));
        if (check.ok) {
          accepted++;
          expect(check.arguments).toEqual(JSON.parse(text));
        }
      }),
      { numRuns: 1_500 },
    );
    // The generator reaches both sides of the boundary.
    expect(accepted).toBeGreaterThan(100); // ~225 expected; fewer than 195 in none of 300 seeds tried
    expect(accepted).toBeLessThan(1_470);
  });

  it("never throws and never accepts an invalid argument, for random JSON and random text", () => {
    const texts = fc.oneof(
      fc.json({ maxDepth: 4 }),
      fc.string({ unit: "binary", maxLength: 200 }),
      nearlyValid.chain((text) =>
        fc
          .tuple(fc.nat(text.length), fc.nat(3), fc.string({ unit: "binary", maxLength: 3 }))
          .map(([at, drop, insert]) => text.slice(0, at) + insert + text.slice(at + drop)),
      ),
    );
    fc.assert(
      fc.property(texts, (text) => {
        const check = registry.checkArguments(search, text);
        if (check.ok) expect(oracleAccepts(text)).toBe(true);
        else expect(["INVALID_JSON", "INVALID_ARGUMENTS"]).toContain(check.code);
      }),
      { numRuns: 3_000 },
    );
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});
