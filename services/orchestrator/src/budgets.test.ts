import { describe, expect, it } from "vitest";
import { checkApprovalWaits, checkFinalAnswer, checkTurn, checkTurnStart, checkWallClock, type Budgets } from "./budgets.js";

const budgets: Budgets = { max_turns: 10, max_tool_calls: 5, max_wall_clock_ms: 1_000, max_tokens: 1_000, max_identical_calls: 2, max_approval_wait_ms: 1_000 };
const fresh = { turns: 0, tool_calls: 0, tokens: 0, signatures: {} };

describe("checkTurn", () => {
  it("lets a turn within every budget through", () => {
    expect(checkTurn(budgets, fresh, { calls: ["a", "b"], tokens: 100 }, 10)).toBeUndefined();
  });

  it("names the budget a turn would break", () => {
    expect(checkTurn(budgets, fresh, { calls: [], tokens: 0 }, 1_001)?.reason).toBe("budget_wall_clock");
    expect(checkTurn(budgets, { ...fresh, tokens: 900 }, { calls: [], tokens: 101 }, 0)?.reason).toBe("budget_tokens");
    expect(checkTurn(budgets, { ...fresh, tool_calls: 4 }, { calls: ["x", "y"], tokens: 0 }, 0)?.reason).toBe("budget_tool_calls");
  });

  it("counts identical calls across turns and within one response", () => {
    expect(checkTurn(budgets, { ...fresh, signatures: { a: 2 } }, { calls: ["a"], tokens: 0 }, 0)?.reason).toBe("repeated_call");
    expect(checkTurn(budgets, fresh, { calls: ["a", "a", "a"], tokens: 0 }, 0)?.reason).toBe("repeated_call");
    expect(checkTurn(budgets, { ...fresh, signatures: { a: 1 } }, { calls: ["a", "b"], tokens: 0 }, 0)).toBeUndefined();
  });
});

describe("the budgets checked outside a model response", () => {
  it("stops a run before a turn beyond its turns or its wall clock", () => {
    expect(checkTurnStart(budgets, 9, 0)).toBeUndefined();
    expect(checkTurnStart(budgets, 10, 0)?.reason).toBe("budget_turns");
    expect(checkTurnStart(budgets, 0, 1_001)?.reason).toBe("budget_wall_clock");
    expect(checkWallClock(budgets, 1_000)).toBeUndefined();
  });

  it("counts a final answer's tokens", () => {
    expect(checkFinalAnswer(budgets, { ...fresh, tokens: 999 }, 1)).toBeUndefined();
    expect(checkFinalAnswer(budgets, { ...fresh, tokens: 999 }, 2)?.reason).toBe("budget_tokens");
  });

  it("names the call that waited too long for a human", () => {
    const waits = [
      { _id: "call_a", since: new Date(5_000) },
      { _id: "call_b", since: new Date(1_000) },
    ];
    expect(checkApprovalWaits(budgets, waits, 2_000)).toBeUndefined();
    expect(checkApprovalWaits(budgets, waits, 2_001)).toEqual({ reason: "approval_timeout", message: "call call_b waited more than 1000 ms for approval" });
  });
});
