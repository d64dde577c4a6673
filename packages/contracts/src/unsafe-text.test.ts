import { describe, expect, it } from "vitest";
import { describeUnsafeText, findUnsafeText, printablePointer, unsafeText } from "./unsafe-text.js";

describe("unsafeText", () => {
  it("refuses NUL and unpaired surrogates in any text, and every control character in an identifier", () => {
    expect(unsafeText("a\u0000b", "text")).toEqual({ reason: "nul", index: 1, codePoint: "U+0000" });
    expect(unsafeText("a\u0000b", "identifier")).toEqual({ reason: "nul", index: 1, codePoint: "U+0000" });
    expect(unsafeText("x\ud800", "text")).toEqual({ reason: "lone_surrogate", index: 1, codePoint: "U+D800" });
    expect(unsafeText("\udc00x", "identifier")).toEqual({ reason: "lone_surrogate", index: 0, codePoint: "U+DC00" });
    expect(unsafeText("line\nbreak\ttab", "text")).toBeUndefined();
    expect(unsafeText("line\nbreak", "identifier")).toEqual({ reason: "control_character", index: 4, codePoint: "U+000A" });
    expect(unsafeText("del\u007f", "identifier")).toMatchObject({ reason: "control_character", codePoint: "U+007F" });
    expect(unsafeText("c1\u0085", "identifier")).toMatchObject({ reason: "control_character", codePoint: "U+0085" });
  });

  it("takes paired surrogates and every other character as they are", () => {
    expect(unsafeText("toolu_01😀", "identifier")).toBeUndefined();
    expect(unsafeText("search_sources", "identifier")).toBeUndefined();
    expect(unsafeText("é ß 中 \u00a0 \u200b", "identifier")).toBeUndefined();
  });

  it("agrees with its definition on every single UTF-16 code unit", () => {
    const wrong: number[] = [];
    for (let c = 0; c <= 0xffff; c++) {
      const s = String.fromCharCode(c);
      const surrogate = c >= 0xd800 && c <= 0xdfff;
      const control = c < 0x20 || (c >= 0x7f && c <= 0x9f);
      if ((unsafeText(s, "text") !== undefined) !== (c === 0 || surrogate)) wrong.push(c);
      if ((unsafeText(s, "identifier") !== undefined) !== (control || surrogate)) wrong.push(c);
    }
    expect(wrong).toEqual([]);
  });
});

describe("findUnsafeText", () => {
  it("points at the first unsafe key, at any depth, and at string values only when asked", () => {
    const args = { query: "a\u0000b", nested: [{ ok: 1 }, { "qu\u0000ery": "x" }] };
    expect(findUnsafeText(args, "none")).toEqual({ reason: "nul", index: 2, codePoint: "U+0000", pointer: "/nested/1/qu\u0000ery", key: true });
    expect(findUnsafeText(args, "text")).toEqual({ reason: "nul", index: 1, codePoint: "U+0000", pointer: "/query", key: false });
    expect(findUnsafeText({ "a/b~c": { "\n": 1 } }, "none")).toMatchObject({ pointer: "/a~1b~0c/\n", reason: "control_character" });
    expect(findUnsafeText({ fine: ["x", 1, null, { y: true }] }, "identifier")).toBeUndefined();
  });

  it("does not look deeper than its limit", () => {
    let deep: unknown = { "\u0000": 1 };
    for (let i = 0; i < 300; i++) deep = [deep];
    expect(findUnsafeText(deep, "text")).toBeUndefined();
  });
});

describe("messages", () => {
  it("name the character without containing it", () => {
    const found = unsafeText("a\u0000b", "identifier")!;
    expect(describeUnsafeText("the call id", found)).toBe("the call id contains a NUL character (U+0000) at index 1");
    expect(printablePointer("/qu\u0000ery/\ud800/😀")).toBe("/qu\\u0000ery/\\ud800/😀");
  });
});
