import { describe, expect, it } from "vitest";
import { pointerOf, pointerTokens, replaceAtPointers, resolvePointer } from "./json-pointer.js";

describe("resolvePointer", () => {
  const doc = JSON.parse('{"a":{"b/c":[7,{"d":42}]},"~1":"tilde-one","m~n":"tilde","__proto__":"own proto","list":["x","y"]}') as never;

  it("follows own properties and canonical array indices", () => {
    expect(resolvePointer(doc, "")).toBe(doc);
    expect(resolvePointer(doc, "/a/b~1c/1/d")).toBe(42);
    expect(resolvePointer(doc, "/list/1")).toBe("y");
  });

  it("unescapes ~1 before ~0, so ~01 is the key ~1", () => {
    expect(resolvePointer(doc, "/~01")).toBe("tilde-one");
    expect(resolvePointer(doc, "/m~0n")).toBe("tilde");
  });

  it("treats __proto__ and constructor as plain keys: an own one resolves, the prototype's never does", () => {
    expect(resolvePointer(doc, "/__proto__")).toBe("own proto");
    expect(resolvePointer({}, "/__proto__")).toBeUndefined();
    expect(resolvePointer({}, "/constructor")).toBeUndefined();
    expect(resolvePointer({ a: {} }, "/a/constructor/name")).toBeUndefined();
    expect(resolvePointer([], "/length")).toBeUndefined();
  });

  it("names nothing with a non-canonical or out-of-range index, or with -", () => {
    for (const index of ["01", "+1", "1e0", " 1", "-", "2", "-1", "1.0"]) expect(resolvePointer(doc, `/list/${index}`)).toBeUndefined();
  });

  it("names nothing along a missing path, through a scalar, or with a malformed pointer", () => {
    expect(resolvePointer(doc, "/missing")).toBeUndefined();
    expect(resolvePointer(doc, "/a/missing/deeper")).toBeUndefined();
    expect(resolvePointer(doc, "/list/0/0")).toBeUndefined();
    expect(resolvePointer(doc, "a")).toBeUndefined();
    expect(resolvePointer(doc, "/bad~2escape")).toBeUndefined();
  });

  it("keeps a null value distinct from a missing one", () => {
    expect(resolvePointer({ a: null }, "/a")).toBeNull();
  });
});

describe("pointerOf", () => {
  it("is the inverse of pointerTokens", () => {
    for (const tokens of [[], ["a", "b/c", "1"], ["~1", "~", ""], ["__proto__"]]) expect(pointerTokens(pointerOf(tokens))).toEqual(tokens);
  });
});

describe("replaceAtPointers", () => {
  it("replaces what the pointers name, nothing else, and never the original", () => {
    const args = { account: "DE89 3704", memo: { secret: "s3cr3t", note: "n" }, cards: ["4111", "5500"], "a/b": "x" };
    const replaced = replaceAtPointers(args, ["/account", "/memo/secret", "/cards/1", "/a~1b", "/absent", "/cards/9", "/cards/-"], "*");
    expect(replaced).toEqual({ account: "*", memo: { secret: "*", note: "n" }, cards: ["4111", "*"], "a/b": "*" });
    expect(args.account).toBe("DE89 3704");
    expect(replaceAtPointers(args, [""], "*")).toBe("*");
  });

  it("replaces an own __proto__ property as data, never the prototype", () => {
    const args = JSON.parse('{"__proto__":{"admin":true},"x":1}') as Record<string, unknown>;
    const replaced = replaceAtPointers(args as never, ["/__proto__", "/constructor"], "*") as Record<string, unknown>;
    expect(Object.getPrototypeOf(replaced)).toBe(Object.prototype);
    expect(Object.getOwnPropertyDescriptor(replaced, "__proto__")?.value).toBe("*");
    expect(Object.hasOwn(replaced, "constructor")).toBe(false);
  });
});
