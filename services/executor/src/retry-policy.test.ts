import { describe, expect, it } from "vitest";
import { decideRetry, retryAfterOf, type FailedAttempt } from "./retry-policy.js";

const policy = { max_attempts: 4, base_delay_ms: 100, max_delay_ms: 1_000 };
const failed = (over: Partial<FailedAttempt> = {}): FailedAttempt => ({ policy, attempt: 1, retryable: true, elapsedMs: 0, ...over });

describe("decideRetry", () => {
  it("never retries a non-retryable failure, whatever the budget", () => {
    expect(decideRetry(failed({ retryable: false }))).toEqual({ retry: false, reason: "not_retryable" });
    expect(decideRetry(failed({ retryable: false, policy: { ...policy, max_attempts: 10 } }))).toEqual({ retry: false, reason: "not_retryable" });
  });

  it("never retries when the contract allows one attempt (the default)", () => {
    expect(decideRetry(failed({ policy: { max_attempts: 1, base_delay_ms: 100, max_delay_ms: 1_000 } }))).toEqual({
      retry: false,
      reason: "attempts_exhausted",
    });
  });

  it("stops once the attempt budget is spent", () => {
    expect(decideRetry(failed({ attempt: 3 })).retry).toBe(true);
    expect(decideRetry(failed({ attempt: 4 }))).toEqual({ retry: false, reason: "attempts_exhausted" });
  });

  it("draws the wait uniformly up to an exponentially growing cap (full jitter)", () => {
    expect(decideRetry(failed({ attempt: 1 }), () => 0)).toEqual({ retry: true, delayMs: 0 });
    expect(decideRetry(failed({ attempt: 1 }), () => 0.999_999)).toEqual({ retry: true, delayMs: 100 });
    expect(decideRetry(failed({ attempt: 2 }), () => 0.999_999)).toEqual({ retry: true, delayMs: 200 });
    expect(decideRetry(failed({ attempt: 3 }), () => 0.5)).toEqual({ retry: true, delayMs: 200 });
    // The cap never exceeds max_delay_ms.
    expect(decideRetry(failed({ attempt: 3, policy: { ...policy, max_attempts: 10, max_delay_ms: 300 } }), () => 0.999_999)).toEqual({
      retry: true,
      delayMs: 300,
    });
  });

  it("never retries sooner than Retry-After", () => {
    expect(decideRetry(failed({ retryAfterMs: 700 }), () => 0.1)).toEqual({ retry: true, delayMs: 700 });
    expect(decideRetry(failed({ attempt: 3, retryAfterMs: 10 }), () => 0.999_999)).toEqual({ retry: true, delayMs: 400 });
  });

  it("gives up when Retry-After asks for a longer wait than the policy allows", () => {
    expect(decideRetry(failed({ retryAfterMs: 5_000 }))).toEqual({ retry: false, reason: "retry_after_beyond_policy" });
  });

  it("gives up when the wait would end past the time budget", () => {
    const budget = { ...policy, max_elapsed_ms: 2_000 };
    expect(decideRetry(failed({ policy: budget, elapsedMs: 1_000, retryAfterMs: 900 })).retry).toBe(true);
    expect(decideRetry(failed({ policy: budget, elapsedMs: 1_500, retryAfterMs: 900 }))).toEqual({ retry: false, reason: "time_budget_exhausted" });
  });
});

describe("retryAfterOf", () => {
  it("reads a non-negative number and ignores anything else", () => {
    expect(retryAfterOf({ retry_after_ms: 250 })).toBe(250);
    expect(retryAfterOf({ retry_after_ms: -1 })).toBeUndefined();
    expect(retryAfterOf({ retry_after_ms: "soon" })).toBeUndefined();
    expect(retryAfterOf(undefined)).toBeUndefined();
  });
});
