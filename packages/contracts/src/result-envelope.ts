import { z } from "zod";
import { ErrorCodeSchema, isRetryableByDefault, type ErrorCode } from "./error-codes.js";
import { CallIdSchema, type CallId } from "./ids.js";

/** Any JSON value (what a tool may return as data). */
export const JsonValueSchema = z.json();
export type JsonValue = z.infer<typeof JsonValueSchema>;

/** One schema violation, addressed by an RFC 6901 JSON pointer into the arguments. */
export const ViolationSchema = z.object({
  pointer: z.string().max(1024),
  message: z.string().max(1024),
  keyword: z.string().max(64),
});
export type Violation = z.infer<typeof ViolationSchema>;

/** The error half of a result envelope: a stable code, a model-safe message, optional structured details. */
export const ToolErrorSchema = z.object({
  code: ErrorCodeSchema,
  message: z.string().max(2048),
  details: z.record(z.string(), JsonValueSchema).optional(),
});
export type ToolError = z.infer<typeof ToolErrorSchema>;

const common = {
  call_id: CallIdSchema,
  operation_id: z.string().max(128).optional(),
  evidence_ref: z.string().max(256).optional(),
  replayed: z.boolean().optional(),
};

/** A successful observation. An empty list is a success, not an error. */
export const SuccessResultSchema = z.object({
  ok: z.literal(true),
  data: JsonValueSchema,
  retryable: z.literal(false),
  truncated: z.boolean().optional(),
  ...common,
});

/** A failed observation: a typed error the model can act on, never a stack trace. */
export const FailureResultSchema = z.object({
  ok: z.literal(false),
  error: ToolErrorSchema,
  retryable: z.boolean(),
  ...common,
});

/** The one shape every terminal outcome takes, returned to the model under its own call id. */
export const ResultEnvelopeSchema = z.discriminatedUnion("ok", [SuccessResultSchema, FailureResultSchema]);
export type ResultEnvelope = z.infer<typeof ResultEnvelopeSchema>;
export type SuccessResult = z.infer<typeof SuccessResultSchema>;
export type FailureResult = z.infer<typeof FailureResultSchema>;

/** Builds a success envelope. */
export function success(callId: CallId, data: JsonValue, extra: Partial<Omit<SuccessResult, "ok" | "data" | "call_id" | "retryable">> = {}): SuccessResult {
  return { ok: true, data, retryable: false, call_id: callId, ...extra };
}

/** Builds a failure envelope; `retryable` defaults to the code's documented default. */
export function failure(
  callId: CallId,
  code: ErrorCode,
  message: string,
  extra: { details?: Record<string, JsonValue>; retryable?: boolean; evidence_ref?: string; operation_id?: string } = {},
): FailureResult {
  const { details, retryable, ...rest } = extra;
  return {
    ok: false,
    error: details === undefined ? { code, message } : { code, message, details },
    retryable: retryable ?? isRetryableByDefault(code),
    call_id: callId,
    ...rest,
  };
}
