import { describe, expect, it } from "vitest";
import { argumentWarnings } from "./redaction.js";

describe("argumentWarnings", () => {
  it("flags text that is not NFC or holds invisible or direction-changing characters, by pointer", () => {
    expect(argumentWarnings({ claim: "Café" })).toEqual([]);
    expect(argumentWarnings({ claim: "Cafe\u0301", list: ["ok", "pay\u202Eevil"], note: "a\u200Bb" })).toEqual([
      "/claim is not in Unicode NFC: it may look like other text",
      "/list/1 contains invisible or direction-changing characters",
      "/note contains invisible or direction-changing characters",
    ]);
  });
});
