import { z } from "zod";

/**
 * The closed set of error codes a tool call can end with. Models and hosts branch on these codes,
 * never on messages; adding a code is a compatible change, renaming or removing one is not.
 */
export const ERROR_CODES = {
  UNKNOWN_TOOL: { retryable: false, description: "The tool name is not in the registry." },
  TOOL_DISABLED: { retryable: false, description: "The tool is registered but disabled or quarantined." },
  INVALID_JSON: { retryable: false, description: "The arguments are not parseable JSON." },
  INVALID_ARGUMENTS: {
    retryable: false,
    description: "The arguments violate the tool's input schema or size limits; details carry JSON pointers.",
  },
  OBJECT_NOT_FOUND: { retryable: false, description: "An id in the arguments resolves to no object." },
  AMBIGUOUS_OBJECT: { retryable: false, description: "An id or name in the arguments resolves to more than one object." },
  PERMISSION_DENIED: { retryable: false, description: "The authenticated principal may not make this call." },
  STATE_CONFLICT: { retryable: false, description: "The target object's state does not allow the action." },
  APPROVAL_REQUIRED: { retryable: false, description: "A human must approve this exact call before it runs." },
  APPROVAL_DENIED: { retryable: false, description: "The approver refused the call." },
  APPROVAL_EXPIRED: { retryable: false, description: "The approval request or token expired before use." },
  APPROVAL_MISMATCH: { retryable: false, description: "The approval was given for another plan, call or set of arguments." },
  IDEMPOTENCY_CONFLICT: {
    retryable: false,
    description: "The idempotency key was already used with different arguments.",
  },
  RATE_LIMITED: { retryable: true, description: "A quota was exhausted; details.retry_after_ms says when to retry." },
  TIMEOUT: { retryable: true, description: "A side-effect-free call did not finish within its timeout." },
  OUTCOME_UNKNOWN: {
    retryable: false,
    description: "A call with side effects may or may not have taken effect; it is reconciled, never blindly retried.",
  },
  EXECUTION_ERROR: { retryable: false, description: "The tool failed; evidence_ref points operators to the cause." },
  UPSTREAM_UNAVAILABLE: { retryable: true, description: "A dependency of the tool is unavailable." },
  INVALID_TOOL_RESULT: {
    retryable: false,
    description: "The tool returned a result that violates its output schema; it is not forwarded.",
  },
  RESULT_TOO_LARGE: { retryable: false, description: "The tool's result exceeds the contract's size limit." },
  BUDGET_EXCEEDED: { retryable: false, description: "A run budget (turns, calls, time, tokens) was exhausted." },
  APPROVAL_CONSUMED: {
    retryable: false,
    description: "The approval was already used: an approval authorizes one presentation of one call, never a replay.",
  },
} as const satisfies Record<string, { retryable: boolean; description: string }>;

export type ErrorCode = keyof typeof ERROR_CODES;

/** Zod schema of {@link ErrorCode}; rejects any code outside the closed set. */
export const ErrorCodeSchema = z.enum(Object.keys(ERROR_CODES) as [ErrorCode, ...ErrorCode[]]);

/** Whether a failure with this code may be retried by default (contracts may be stricter, never looser). */
export function isRetryableByDefault(code: ErrorCode): boolean {
  return ERROR_CODES[code].retryable;
}
