import { describe, expect, it } from "vitest";
import { parseOperationAnswer, parseReconciliationAnswer } from "./status-protocol.js";

describe("status-check protocol", () => {
  it("reads reconciliation answers, with or without the original result", () => {
    expect(parseReconciliationAnswer({ state: "applied", result: { id: 1 } })).toEqual({ state: "applied", result: { id: 1 } });
    expect(parseReconciliationAnswer({ state: "applied" })).toEqual({ state: "applied" });
    expect(parseReconciliationAnswer({ state: "not_applied", result: "ignored" })).toEqual({ state: "not_applied" });
    expect(parseReconciliationAnswer({ state: "unknown" })).toEqual({ state: "unknown" });
  });

  it("refuses answers outside the protocol instead of guessing", () => {
    expect(parseReconciliationAnswer({ state: "done" })).toBeUndefined();
    expect(parseReconciliationAnswer("applied")).toBeUndefined();
    expect(parseReconciliationAnswer({ state: "running" })).toBeUndefined();
    expect(parseOperationAnswer({ state: "applied" })).toBeUndefined();
    expect(parseOperationAnswer(null)).toBeUndefined();
  });

  it("reads operation answers and types an operation's error", () => {
    expect(parseOperationAnswer({ state: "running" })).toEqual({ state: "running" });
    expect(parseOperationAnswer({ state: "succeeded", result: [1] })).toEqual({ state: "succeeded", result: [1] });
    expect(parseOperationAnswer({ state: "failed", error: { code: "STATE_CONFLICT", message: "no" } })).toEqual({
      state: "failed",
      error: { code: "STATE_CONFLICT", message: "no" },
    });
    // A code outside the closed set never reaches the model as such.
    expect(parseOperationAnswer({ state: "failed", error: { code: "ORA-00942", message: "table missing" } })).toMatchObject({
      error: { code: "EXECUTION_ERROR" },
    });
  });
});
