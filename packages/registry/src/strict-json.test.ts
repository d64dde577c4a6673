import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseStrictJson, type StrictJsonResult } from "./strict-json.js";

const parse = (text: string, limits: Partial<Parameters<typeof parseStrictJson>[1]> = {}): StrictJsonResult =>
  parseStrictJson(text, { maxDepth: 64, ...limits });

function failure(result: StrictJsonResult) {
  if (result.ok) throw new Error(`expected a failure, got ${JSON.stringify(result.value)}`);
  return result.error;
}

/** What JSON.parse makes of a text, or "error". */
function oracle(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return "error";
  }
}

describe("parseStrictJson: RFC 8259 syntax", () => {
  it("parses what JSON.parse parses, to the same value", () => {
    for (const text of ['{"a":[1,-2.5,3e2,true,false,null,"x"]}', " [ ] ", '"\\u00e9\\n\\/"', "0", "-0", "1E-3", '{"":{}}', '"😀"', '"\\ud83d\\ude00"']) {
      expect(parse(text)).toEqual({ ok: true, value: JSON.parse(text) });
    }
  });

  it("refuses what JSON.parse refuses, as INVALID_JSON syntax", () => {
    for (const text of [
      "",
      " ",
      "{",
      "{query:",
      "[1,]",
      '{"a":1,}',
      "01",
      "1.",
      ".5",
      "+1",
      "-",
      "1e",
      '"\\x"',
      '"\\u12"',
      '"a\nb"',
      "tru",
      "nul",
      "[1 2]",
      "{} {}",
      "\uFEFF{}",
      "NaN",
      "Infinity",
      "'a'",
    ]) {
      expect(oracle(text)).toBe("error");
      expect(failure(parse(text))).toMatchObject({ code: "INVALID_JSON", keyword: "syntax" });
    }
  });

  it("agrees with JSON.parse on every text JSON.stringify produces (no crash, same value)", () => {
    fc.assert(
      fc.property(fc.json(), (text) => {
        const result = parse(text);
        if (result.ok) expect(result.value).toEqual(JSON.parse(text));
        // The one legitimate disagreement: integer literals a double cannot hold exactly.
        else expect(result.error.keyword).toBe("numberRange");
      }),
      { numRuns: 400 },
    );
  });

  it("never throws on arbitrary text, and accepts nothing JSON.parse refuses", () => {
    const alphabet = fc.constantFrom(...'{}[]":,0123456789-+.eE tfalsenru\\\n/ud800'.split(""), "\ud800", "\udc00", "😀");
    fc.assert(
      fc.property(fc.oneof(fc.string({ unit: "binary", maxLength: 40 }), fc.string({ unit: alphabet, maxLength: 40 })), (text) => {
        const result = parse(text);
        const expected = oracle(text);
        if (result.ok) expect(result.value).toEqual(expected);
        else if (expected === "error") expect(result.error.code).toBe("INVALID_JSON");
      }),
      { numRuns: 2_000 },
    );
  });
});

describe("parseStrictJson: I-JSON (RFC 7493)", () => {
  it("refuses duplicate keys, also when an escape spells the same key", () => {
    expect(failure(parse('{"a":1,"a":2}'))).toMatchObject({ code: "INVALID_JSON", keyword: "duplicateKey", pointer: "/a" });
    expect(failure(parse('{"a":1,"\\u0061":2}'))).toMatchObject({ keyword: "duplicateKey" });
    expect(failure(parse('{"x":[{"k":1,"k":1}]}'))).toMatchObject({ keyword: "duplicateKey", pointer: "/x/0/k" });
    expect(parse('{"a":{"a":1}}')).toMatchObject({ ok: true });
  });

  it("refuses lone surrogates, raw or escaped, and accepts pairs however they are written", () => {
    for (const text of ['"\\ud800"', '"\\udc00"', '"\\ud800x"', '"\\ud800\\ud800"', '"\ud800"', '"a\udc00"', '{"\\ud800":1}', '"\\ud83d"']) {
      expect(failure(parse(text))).toMatchObject({ code: "INVALID_JSON", keyword: "loneSurrogate" });
    }
    for (const text of ['"\\ud83d\\ude00"', '"\ud83d\ude00"', '"\ud83d\\ude00"', '"\\ud83d\ude00"']) expect(parse(text)).toEqual({ ok: true, value: "😀" });
  });

  it("refuses integers a double cannot hold and numbers that overflow, keeps ordinary ones", () => {
    expect(failure(parse('{"n":12345678901234567890}'))).toMatchObject({ keyword: "numberRange", pointer: "/n" });
    expect(failure(parse("9007199254740992"))).toMatchObject({ keyword: "numberRange" });
    expect(failure(parse("1e400"))).toMatchObject({ keyword: "numberRange" });
    expect(failure(parse("-1e400"))).toMatchObject({ keyword: "numberRange" });
    expect(parse("9007199254740991")).toEqual({ ok: true, value: 9007199254740991 });
    expect(parse("1.5e300")).toEqual({ ok: true, value: 1.5e300 });
  });

  it("keeps __proto__ an own property and never touches a prototype", () => {
    const result = parse('{"__proto__":{"polluted":true},"constructor":{"prototype":{"polluted":true}}}');
    if (!result.ok) throw new Error("expected ok");
    const value = result.value as Record<string, unknown>;
    expect(Object.getPrototypeOf(value)).toBe(Object.prototype);
    expect(Object.keys(value)).toEqual(["__proto__", "constructor"]);
    expect(Object.getOwnPropertyDescriptor(value, "__proto__")?.value).toEqual({ polluted: true });
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.prototype).not.toHaveProperty("polluted");
  });
});

describe("parseStrictJson: limits while parsing", () => {
  it("stops at the depth limit with a pointer, before reading the rest", () => {
    expect(parse("[[[]]]", { maxDepth: 3 })).toMatchObject({ ok: true });
    expect(failure(parse('{"a":[[[1]]], "rest": ' + "x".repeat(10) + "}", { maxDepth: 3 }))).toMatchObject({
      code: "INVALID_ARGUMENTS",
      keyword: "maxDepth",
      pointer: "/a/0/0",
    });
    // A text far deeper than any stack is refused at the limit, not by a stack overflow.
    expect(failure(parse("[".repeat(100_000), { maxDepth: 16 }))).toMatchObject({ keyword: "maxDepth" });
  });

  it("counts string length in code points, as JSON Schema's maxLength does, and ignores keys", () => {
    expect(parse('{"k":"😀😀😀"}', { maxStringLength: 3 })).toMatchObject({ ok: true });
    expect(failure(parse('{"k":"abcd"}', { maxStringLength: 3 }))).toMatchObject({ code: "INVALID_ARGUMENTS", keyword: "maxLength", pointer: "/k" });
    expect(parse('{"a long key is not a string value":"ab"}', { maxStringLength: 3 })).toMatchObject({ ok: true });
  });

  it("stops at the array limit without building the rest", () => {
    expect(parse("[1,2,3]", { maxArrayItems: 3 })).toMatchObject({ ok: true });
    expect(failure(parse('{"xs":[1,2,3,4,oops]}', { maxArrayItems: 3 }))).toMatchObject({ keyword: "maxItems", pointer: "/xs" });
  });
});
