import canonicalize from "canonicalize";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { canonicalHash, canonicalJson, sha256 } from "./hashing.js";

describe("canonicalJson / canonicalHash (RFC 8785)", () => {
  it("is independent of key order at every depth", () => {
    const a = { b: 1, a: { y: [1, { q: true, p: null }], x: "s" } };
    const b = { a: { x: "s", y: [1, { p: null, q: true }] }, b: 1 };
    expect(canonicalJson(a)).toBe('{"a":{"x":"s","y":[1,{"p":null,"q":true}]},"b":1}');
    expect(canonicalHash(a)).toBe(canonicalHash(b));
  });

  it("keeps array order significant", () => {
    expect(canonicalHash([1, 2])).not.toBe(canonicalHash([2, 1]));
  });

  it("spells numbers one way: 1 and 1.0 hash alike", () => {
    expect(canonicalHash(JSON.parse('{"n":1}'))).toBe(canonicalHash(JSON.parse('{"n":1.0}')));
    expect(canonicalHash(JSON.parse('{"n":1e2}'))).toBe(canonicalHash({ n: 100 }));
    expect(canonicalJson(JSON.parse("[1.0, -0, 1e21, 0.000001, 1e-7]"))).toBe("[1,0,1e+21,0.000001,1e-7]");
  });

  it("does not normalize Unicode: NFC and NFD spellings hash differently", () => {
    const nfc = "caf\u00e9";
    const nfd = "cafe\u0301";
    expect(nfc.normalize("NFD")).toBe(nfd);
    expect(canonicalHash({ name: nfc })).not.toBe(canonicalHash({ name: nfd }));
  });

  it("sorts keys by UTF-16 code units", () => {
    // RFC 8785 §3.2.3: "\u20ac" (euro) sorts before "\ud83d\ude00" (emoji, a surrogate pair) although its code point is lower only in UTF-16.
    expect(canonicalJson({ "\ud83d\ude00": 2, "\u20ac": 1, a: 0 })).toBe('{"a":0,"\u20ac":1,"\ud83d\ude00":2}');
    expect(canonicalJson({ "\ufb33": 1, "\ud83d\ude00": 2 })).toBe('{"\ud83d\ude00":2,"\ufb33":1}');
  });

  it("hashes to sha256:<hex> of the canonical text", () => {
    expect(canonicalHash({ b: 2, a: 1 })).toBe(sha256('{"a":1,"b":2}'));
    expect(sha256("")).toBe("sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    expect(canonicalHash({ a: 1 })).toMatch(/^sha256:[0-9a-f]{64}$/);
  });

  it("writes what the reference implementation of RFC 8785 writes, for any JSON value", () => {
    // `canonicalize` is the implementation by the RFC's authors; full unicode strings and keys, every number.
    const json = fc.jsonValue({ maxDepth: 4, stringUnit: "binary" });
    fc.assert(
      fc.property(json, (value) => {
        expect(canonicalJson(value)).toBe(canonicalize(value));
      }),
      { numRuns: 2_000 },
    );
  });

  it("serializes what a value's toJSON returns, leaves out undefined members and writes undefined in an array as null", () => {
    const at = new Date("2026-12-07T10:00:00.000Z");
    expect(canonicalJson({ b: at, a: undefined, c: [undefined, 1] })).toBe('{"b":"2026-12-07T10:00:00.000Z","c":[null,1]}');
    expect(canonicalJson({ b: at, c: [undefined, 1] })).toBe(canonicalize({ b: at, c: [undefined, 1] }));
    // The same object twice is not a cycle.
    const shared = { x: 1 };
    expect(canonicalJson([shared, { shared }])).toBe('[{"x":1},{"shared":{"x":1}}]');
  });

  it.each<[string, unknown]>([
    ["undefined", undefined],
    ["a function", () => 1],
    ["a nested function", { a: () => 1 }],
    ["a function in an array", [() => 1]],
    ["a symbol inside an object", { a: Symbol("s") }],
    ["NaN", { n: Number.NaN }],
    ["Infinity", [Number.POSITIVE_INFINITY]],
    ["a BigInt", { n: 1n }],
    ["a lone surrogate", { s: "\ud800" }],
    ["a lone surrogate in a key", { "\udc00": 1 }],
    ["a toJSON that returns undefined", { a: { toJSON: () => undefined } }],
    [
      "a circular structure",
      (() => {
        const a: unknown[] = [];
        a.push({ a });
        return a;
      })(),
    ],
  ])("throws TypeError for %s, which JSON cannot represent", (_name, value) => {
    expect(() => canonicalJson(value)).toThrow(TypeError);
  });
});
