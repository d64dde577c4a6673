import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { patternMaxLength, valueBounds, walkSchema } from "./schema-walk.js";

describe("patternMaxLength", () => {
  it("bounds anchored patterns built from classes, groups, alternation and bounded quantifiers", () => {
    expect(patternMaxLength("^[A-Za-z0-9_-]{1,128}$")).toBe(128);
    expect(patternMaxLength("^op_[0-9A-HJKMNP-TV-Z]{26}_[0-9]{1,5}$")).toBe(35);
    expect(patternMaxLength("^(ab|cde)?x{2,3}$")).toBe(6);
    expect(patternMaxLength("^(?:a|bb){0,4}\\.v\\d{2}$")).toBe(12);
    expect(patternMaxLength("^ev_[0-9a-f]{16}$")).toBe(19);
  });

  it("has no bound for unanchored, starred, open-ended or back-referencing patterns", () => {
    for (const pattern of ["[a-z]{1,8}", "^[a-z]{1,8}", "^a*$", "^a+$", "^a{2,}$", "^(a)\\1$", "^(?=a)a$", "^a{1,2$"])
      expect(patternMaxLength(pattern)).toBe(Infinity);
  });

  it("is never below the length of a string the pattern matches", () => {
    const patterns = ["^[a-z]{1,16}$", "^op_[0-9A-HJKMNP-TV-Z]{26}_[0-9]{1,5}$", "^(ab|cde)?x{2,3}$", "^(?:a|bb){0,4}-[\\w.]{0,3}$", "^\\u00e9{1,2}[😀]?$"];
    for (const pattern of patterns) {
      const max = patternMaxLength(pattern);
      expect(Number.isFinite(max)).toBe(true);
      fc.assert(
        fc.property(fc.stringMatching(new RegExp(pattern, "u")), (s) => {
          expect([...s].length).toBeLessThanOrEqual(max);
        }),
        { numRuns: 200 },
      );
    }
  });
});

describe("valueBounds", () => {
  it("bounds strings, arrays and depth of closed schemas, following local $refs", () => {
    const schema = {
      type: "object",
      properties: {
        q: { type: "string", maxLength: 30 },
        tags: { type: "array", maxItems: 4, items: { $ref: "#/$defs/tag" } },
        kind: { enum: ["a", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"] },
      },
      additionalProperties: false,
      $defs: { tag: { type: "object", properties: { v: { type: "string", pattern: "^[a-z]{1,8}$" } }, additionalProperties: false } },
    };
    expect(valueBounds(schema)).toEqual({ string: 40, items: 4, depth: 3 });
  });

  it("is unbounded for open objects, unbounded arrays and recursion", () => {
    expect(valueBounds({ type: "object" })).toMatchObject({ string: Infinity, depth: Infinity });
    expect(valueBounds({ type: "array", items: { type: "integer" } })).toMatchObject({ items: Infinity, depth: 1 });
    expect(valueBounds({ $ref: "#" })).toMatchObject({ depth: Infinity });
    // unevaluatedProperties next to allOf sees properties this analysis does not follow: no bound.
    expect(valueBounds({ type: "object", allOf: [{ properties: { a: { type: "string" } } }], unevaluatedProperties: false })).toMatchObject({
      string: Infinity,
    });
  });

  it("counts no string where the schema accepts none", () => {
    expect(valueBounds({ type: "object", properties: { n: { type: "integer" } }, additionalProperties: false })).toEqual({ string: 0, items: 0, depth: 1 });
  });
});

describe("walkSchema", () => {
  it("visits every subschema with its pointer and the applicator that led to it", () => {
    const seen: string[] = [];
    walkSchema(
      { type: "object", properties: { "a/b": { type: "array", items: { anyOf: [{ type: "string" }, true] } } }, $defs: { x: false } },
      (_s, pointer, via) => seen.push(`${pointer}<${via ?? "root"}`),
    );
    expect(seen).toEqual([
      "<root",
      "/properties/a~1b<properties",
      "/properties/a~1b/items<items",
      "/properties/a~1b/items/anyOf/0<anyOf",
      "/properties/a~1b/items/anyOf/1<anyOf",
      "/$defs/x<$defs",
    ]);
  });
});
