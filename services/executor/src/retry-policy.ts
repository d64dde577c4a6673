import type { ToolContract } from "@toolgate/registry";

/** What the executor knows when an attempt failed with a typed error. */
export interface FailedAttempt {
  /** The contract's retry policy. */
  policy: ToolContract["retry"];
  /** The attempt that failed (1-based; attempts abandoned by a dead executor count too). */
  attempt: number;
  /** The failure's `retryable` flag: the tool asserts the attempt had no effect. */
  retryable: boolean;
  /** The far side's Retry-After, if it sent one. */
  retryAfterMs?: number;
  /** Time since the key's first attempt was claimed. */
  elapsedMs: number;
}

/** Whether to run another attempt, and after how long. */
export type RetryDecision =
  { retry: true; delayMs: number } | { retry: false; reason: "not_retryable" | "attempts_exhausted" | "time_budget_exhausted" | "retry_after_beyond_policy" };

/**
 * Retry only a retryable failure, only while the contract's attempt and time budgets last. The wait is
 * exponential backoff with full jitter (uniform in [0, min(max_delay, base * 2^(attempt-1))]), never shorter
 * than the far side's Retry-After; a Retry-After longer than the policy's max delay ends the retries. Pure.
 */
export function decideRetry(failed: FailedAttempt, random: () => number = Math.random): RetryDecision {
  const { policy } = failed;
  if (!failed.retryable) return { retry: false, reason: "not_retryable" };
  if (failed.attempt >= policy.max_attempts) return { retry: false, reason: "attempts_exhausted" };
  if (failed.retryAfterMs !== undefined && failed.retryAfterMs > policy.max_delay_ms) return { retry: false, reason: "retry_after_beyond_policy" };
  const cap = Math.min(policy.max_delay_ms, policy.base_delay_ms * 2 ** Math.max(0, failed.attempt - 1));
  const jittered = Math.floor(random() * (cap + 1));
  const delayMs = Math.max(jittered, Math.ceil(failed.retryAfterMs ?? 0));
  if (policy.max_elapsed_ms !== undefined && failed.elapsedMs + delayMs > policy.max_elapsed_ms) return { retry: false, reason: "time_budget_exhausted" };
  return { retry: true, delayMs };
}

/** The Retry-After a failure carries in `details.retry_after_ms`, if it is a sane number. */
export function retryAfterOf(details: Record<string, unknown> | undefined): number | undefined {
  const value = details?.retry_after_ms;
  return typeof value === "number" && Number.isFinite(value) && value >= 0 ? Math.min(value, 24 * 3_600_000) : undefined;
}
