import { Ajv2020 } from "ajv/dist/2020.js";
import { describe, expect, it } from "vitest";
import { closeObjectSchemas } from "./schema-closure.js";
import type { JsonSchema } from "./schema-walk.js";

/** The registry's own ajv settings: a closed schema must still compile under strict mode. */
function validator(schema: JsonSchema): (value: unknown) => boolean {
  const closure = closeObjectSchemas(schema);
  if (!closure.ok) throw new Error(closure.message);
  const ajv = new Ajv2020({ strict: true, allErrors: true, coerceTypes: false, ownProperties: true });
  const validate = ajv.compile(closure.schema);
  return (value) => validate(value);
}

const str = { type: "string" };

describe("closeObjectSchemas", () => {
  it("refuses an unknown field of an object that leaves additionalProperties unset, at every depth", () => {
    const valid = validator({
      type: "object",
      properties: {
        query: str,
        filter: { type: "object", properties: { lang: str } },
        rows: { type: "array", items: { type: "object", properties: { id: str } } },
      },
      required: ["query"],
    });
    expect(valid({ query: "q", filter: { lang: "en" }, rows: [{ id: "1" }] })).toBe(true);
    expect(valid({ query: "q", force: true })).toBe(false);
    expect(valid({ query: "q", filter: { lang: "en", force: true } })).toBe(false);
    expect(valid({ query: "q", rows: [{ id: "1" }, { id: "2", force: true }] })).toBe(false);
  });

  it("says where it closed, and leaves the schema it was given untouched", () => {
    const schema = { type: "object", properties: { a: { type: "object" }, b: { type: "array", prefixItems: [{ type: "object" }] } } };
    const before = structuredClone(schema);
    const closure = closeObjectSchemas(schema);
    expect(closure.ok && closure.closed.sort()).toEqual(["", "/properties/a", "/properties/b/prefixItems/0"]);
    expect(schema).toEqual(before);
  });

  it("keeps what is open on purpose open: additionalProperties true, a typed map, unevaluatedProperties", () => {
    const valid = validator({
      type: "object",
      properties: {
        free: { type: "object", additionalProperties: true },
        labels: { type: "object", additionalProperties: str },
        entries: { type: "object", additionalProperties: { type: "object", properties: { n: { type: "integer" } } } },
      },
    });
    expect(valid({ free: { anything: [1, { x: 2 }] }, labels: { a: "x", b: "y" } })).toBe(true);
    expect(valid({ labels: { a: 1 } })).toBe(false);
    expect(valid({ entries: { k: { n: 1 } } })).toBe(true);
    // The map is open for keys, and each value is an object closed like any other.
    expect(valid({ entries: { k: { n: 1, extra: true } } })).toBe(false);
  });

  it("closes a composed object as a whole: allOf members, if/then, dependentSchemas and patternProperties count", () => {
    const valid = validator({
      type: "object",
      allOf: [{ properties: { a: str } }, { properties: { b: str } }],
      patternProperties: { "^x-": str },
      if: { properties: { kind: { const: "file" } }, required: ["kind"] },
      then: { properties: { path: str } },
      properties: { kind: str },
      dependentSchemas: { b: { properties: { c: str } } },
    });
    expect(valid({ a: "1", b: "2", c: "3", "x-trace": "t", kind: "file", path: "/p" })).toBe(true);
    expect(valid({ a: "1", force: true })).toBe(false);
    // `path` is declared only by the branch that applies when kind is "file".
    expect(valid({ kind: "url", path: "/p" })).toBe(false);
    expect(valid({ c: "3" })).toBe(false);
  });

  it("closes each alternative of a value that is one of several shapes (nullable objects)", () => {
    const valid = validator({
      type: "object",
      properties: { target: { anyOf: [{ type: "object", properties: { id: str } }, { type: "null" }] } },
    });
    expect(valid({ target: { id: "t" } })).toBe(true);
    expect(valid({ target: null })).toBe(true);
    expect(valid({ target: { id: "t", force: true } })).toBe(false);
  });

  it("closes a definition where it is used on its own, recursive ones included", () => {
    const valid = validator({
      $defs: { node: { type: "object", properties: { name: str, children: { type: "array", items: { $ref: "#/$defs/node" } } } } },
      type: "object",
      properties: { tree: { $ref: "#/$defs/node" } },
    });
    expect(valid({ tree: { name: "a", children: [{ name: "b", children: [] }] } })).toBe(true);
    expect(valid({ tree: { name: "a", children: [{ name: "b", force: true }] } })).toBe(false);
  });

  it("does not close a definition that an object extends with properties of its own", () => {
    const valid = validator({
      $defs: { base: { type: "object", properties: { id: str } } },
      type: "object",
      allOf: [{ $ref: "#/$defs/base" }],
      properties: { note: str },
    });
    expect(valid({ id: "1", note: "n" })).toBe(true);
    expect(valid({ id: "1", force: true })).toBe(false);
  });

  it("refuses, naming the place, what no single closure can cover", () => {
    const twoParts = closeObjectSchemas({
      type: "object",
      properties: {
        x: {
          allOf: [
            { type: "object", properties: { a: str } },
            { type: "object", properties: { b: str } },
          ],
        },
      },
    });
    expect(twoParts).toMatchObject({ ok: false, pointer: "/properties/x" });

    const sharedDefinition = closeObjectSchemas({
      $defs: { base: { type: "object", properties: { id: str } } },
      type: "object",
      properties: { plain: { $ref: "#/$defs/base" }, extended: { type: "object", allOf: [{ $ref: "#/$defs/base" }], properties: { note: str } } },
    });
    expect(sharedDefinition).toMatchObject({ ok: false, pointer: "/properties/plain/$ref" });
    expect(!sharedDefinition.ok && sharedDefinition.message).toContain("#/$defs/base");

    expect(closeObjectSchemas({ type: "object", properties: { x: { $ref: "https://example.com/s.json" } } })).toMatchObject({ ok: false });
  });

  it("leaves conditions and any-values as written", () => {
    const closure = closeObjectSchemas({
      type: "object",
      properties: {
        anything: {},
        items: { type: "array", contains: { type: "object", properties: { k: str } } },
        guarded: { type: "object", not: { type: "object", properties: { admin: { const: true } }, required: ["admin"] } },
      },
    });
    expect(closure.ok && closure.closed.sort()).toEqual(["", "/properties/guarded"]);
    const valid = validator({ type: "object", properties: { anything: {} } });
    expect(valid({ anything: { a: 1 } })).toBe(true);
  });
});
