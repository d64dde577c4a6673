import { describe, expect, it } from "vitest";
import { argumentWarnings, REDACTED, redactArguments } from "./redaction.js";

describe("redactArguments", () => {
  it("replaces the values at the contract's sensitive pointers and leaves the original alone", () => {
    const args = { account: "DE89 3704", memo: { secret: "s3cr3t", note: "n" }, cards: ["4111", "5500"], "a/b": "x" };
    const redacted = redactArguments(args, ["/account", "/memo/secret", "/cards/1", "/a~1b", "/absent", "/cards/9"]);
    expect(redacted).toEqual({ account: REDACTED, memo: { secret: REDACTED, note: "n" }, cards: ["4111", REDACTED], "a/b": REDACTED });
    expect(args.account).toBe("DE89 3704");
    expect(redactArguments(args, [""])).toEqual({ [REDACTED]: REDACTED });
  });
});

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
