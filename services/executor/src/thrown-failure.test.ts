import { describe, expect, it } from "vitest";
import { classifyThrown, NotAppliedError } from "./thrown-failure.js";

// What an exception says about a side effect: only a failure known to precede the effect is definite.

const withCode = (code: string, message = code): Error => Object.assign(new Error(message), { code });
const named = (name: string): Error => Object.assign(new Error(name), { name });

describe("classifyThrown", () => {
  it("leaves every failure of a tool that does not write definite", () => {
    for (const error of [withCode("ECONNRESET"), withCode("ETIMEDOUT"), new Error("boom"), "a string"]) {
      expect(classifyThrown(error, false)).toEqual({ kind: "definite" });
    }
  });

  it("makes a broken connection of a writing tool uncertain: reset, broken pipe, undici socket errors", () => {
    for (const code of ["ECONNRESET", "EPIPE", "ECONNABORTED", "UND_ERR_SOCKET", "UND_ERR_CLOSED"]) {
      expect(classifyThrown(withCode(code), true)).toEqual({ kind: "uncertain", cause: "connection_lost" });
    }
  });

  it("makes a timeout uncertain, by code or by name", () => {
    for (const error of [withCode("ETIMEDOUT"), withCode("UND_ERR_HEADERS_TIMEOUT"), named("TimeoutError"), named("MongoNetworkTimeoutError")]) {
      expect(classifyThrown(error, true)).toEqual({ kind: "uncertain", cause: "timeout" });
    }
  });

  it("recognises MongoDB driver network errors during the tool's write, by name, label or cause", () => {
    expect(classifyThrown(named("MongoNetworkError"), true)).toEqual({ kind: "uncertain", cause: "connection_lost" });
    const labelled = Object.assign(new Error("connection 3 to 127.0.0.1:27017 closed"), { name: "MongoServerError", errorLabels: ["RetryableWriteError"] });
    expect(classifyThrown(labelled, true)).toEqual({ kind: "uncertain", cause: "connection_lost" });
    // The driver wraps the socket's error: the reset is found in the cause chain.
    const wrapped = new Error("insert failed", { cause: withCode("ECONNRESET", "read ECONNRESET") });
    expect(classifyThrown(wrapped, true)).toEqual({ kind: "uncertain", cause: "connection_lost" });
  });

  it("makes any other exception of a writing tool uncertain: it cannot tell whether the request was sent", () => {
    expect(classifyThrown(new TypeError("cannot read properties of undefined"), true)).toEqual({ kind: "uncertain", cause: "interrupted" });
    expect(classifyThrown("thrown string", true)).toEqual({ kind: "uncertain", cause: "interrupted" });
    expect(classifyThrown(undefined, true)).toEqual({ kind: "uncertain", cause: "interrupted" });
  });

  it("keeps a failure that says it was not applied definite, even when a connection error caused it", () => {
    expect(classifyThrown(new NotAppliedError("validation failed before any I/O"), true)).toEqual({ kind: "definite" });
    expect(classifyThrown(new NotAppliedError("could not connect", { cause: withCode("ECONNREFUSED") }), true)).toEqual({ kind: "definite" });
    // A tool's own error class says so with `applied: false`, on itself or on a cause.
    class TicketRejected extends Error {
      readonly applied = false;
    }
    expect(classifyThrown(new TicketRejected("title too long"), true)).toEqual({ kind: "definite" });
    expect(classifyThrown(new Error("wrapped", { cause: new TicketRejected("x") }), true)).toEqual({ kind: "definite" });
    // `applied: true` or anything else is no such statement.
    expect(classifyThrown(Object.assign(withCode("ECONNRESET"), { applied: "no" }), true)).toEqual({ kind: "uncertain", cause: "connection_lost" });
  });

  it("survives a cyclic cause chain", () => {
    const a = new Error("a");
    const b = new Error("b", { cause: a });
    (a as { cause?: unknown }).cause = b;
    expect(classifyThrown(a, true)).toEqual({ kind: "uncertain", cause: "interrupted" });
  });
});
