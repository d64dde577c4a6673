import { ErrorCodeSchema, JsonValueSchema, type ErrorCode, type JsonValue } from "@toolgate/contracts";
import { z } from "zod";

// The status-check protocol (documented with `status_check` in the registry's contract): what a status tool
// answers when the executor reconciles an unknown outcome or follows a long-running operation.

const ReconciliationAnswerSchema = z.object({
  state: z.enum(["applied", "not_applied", "unknown"]),
  result: JsonValueSchema.optional(),
});

const OperationAnswerSchema = z.object({
  state: z.enum(["accepted", "running", "succeeded", "failed", "cancelled"]),
  result: JsonValueSchema.optional(),
  error: z.object({ code: z.string(), message: z.string() }).optional(),
});

/** A status tool's answer about an unknown outcome. */
export type ReconciliationAnswer = { state: "applied"; result?: JsonValue } | { state: "not_applied" } | { state: "unknown" };

/** A status tool's answer about a long-running operation. */
export type OperationAnswer =
  | { state: "accepted" | "running" | "cancelled" }
  | { state: "succeeded"; result?: JsonValue }
  | { state: "failed"; error: { code: ErrorCode; message: string } };

/** Reads a reconciliation answer; undefined when the data does not follow the protocol. */
export function parseReconciliationAnswer(data: unknown): ReconciliationAnswer | undefined {
  const parsed = ReconciliationAnswerSchema.safeParse(data);
  if (!parsed.success) return undefined;
  if (parsed.data.state !== "applied") return { state: parsed.data.state };
  return parsed.data.result === undefined ? { state: "applied" } : { state: "applied", result: parsed.data.result };
}

/** Reads an operation answer; undefined when the data does not follow the protocol. An untyped error becomes EXECUTION_ERROR. */
export function parseOperationAnswer(data: unknown): OperationAnswer | undefined {
  const parsed = OperationAnswerSchema.safeParse(data);
  if (!parsed.success) return undefined;
  const { state, result, error } = parsed.data;
  if (state === "succeeded") return result === undefined ? { state } : { state, result };
  if (state === "failed") {
    const code = ErrorCodeSchema.safeParse(error?.code);
    return { state, error: { code: code.success ? code.data : "EXECUTION_ERROR", message: (error?.message ?? "the operation failed").slice(0, 1_024) } };
  }
  return { state };
}
