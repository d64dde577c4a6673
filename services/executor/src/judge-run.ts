import { failure, success, type ResultEnvelope } from "@toolgate/contracts";
import type { CompiledTool, ToolRegistry } from "@toolgate/registry";
import type { ToolRun } from "./run-tool.js";
import { classifyThrown, type UncertainCause } from "./thrown-failure.js";

/** Operator-facing details kept under an `evidence_ref`, never shown to the model. */
export interface Evidence {
  kind: string;
  detail: unknown;
}

/** What one run of a tool means for its call, judged against the contract. */
export type Judgement =
  /** A result for the model (success or a typed failure; a retryable failure may still be retried). */
  | { kind: "result"; result: ResultEnvelope; evidence?: Evidence }
  /** A long-running tool accepted the work under its own operation id. */
  | { kind: "accepted"; toolOperationId: string }
  /** A side effect may or may not have happened: never guessed, never retried blindly. */
  | { kind: "unknown"; cause: UncertainCause; message: string; evidence?: Evidence };

/**
 * Judges a run against the tool's contract: a timeout of a side-effecting tool is an unknown outcome; a thrown
 * error is an unknown outcome too when the tool writes and the error does not prove that nothing was applied
 * (see {@link classifyThrown}), else an EXECUTION_ERROR; either way its details go to evidence only. Data must fit the size limit and the output
 * schema (else RESULT_TOO_LARGE / INVALID_TOOL_RESULT, never forwarded). Failures that come with evidence get
 * `evidenceRef`. Pure.
 */
export function judgeRun(run: ToolRun, tool: CompiledTool, registry: ToolRegistry, callId: string, evidenceRef: string): Judgement {
  const { contract } = tool;
  switch (run.kind) {
    case "timed_out":
      return tool.writes
        ? { kind: "unknown", cause: "timeout", message: `${contract.name} did not answer within ${contract.timeout_ms} ms; its effect is unknown` }
        : { kind: "result", result: failure(callId, "TIMEOUT", `${contract.name} did not answer within ${contract.timeout_ms} ms`, { retryable: true }) };
    case "threw": {
      const error = run.error instanceof Error ? run.error : new Error(String(run.error));
      const code = (error as { code?: unknown }).code;
      const evidence = {
        kind: "exception",
        detail: { name: error.name, message: error.message, stack: error.stack, ...(typeof code === "string" ? { code } : {}) },
      };
      const thrown = classifyThrown(run.error, tool.writes);
      if (thrown.kind === "uncertain") {
        // The message names no internals: the exception itself is evidence only.
        return { kind: "unknown", cause: thrown.cause, message: `${contract.name} failed before it could report whether its effect happened`, evidence };
      }
      return { kind: "result", result: failure(callId, "EXECUTION_ERROR", `${contract.name} failed`, { evidence_ref: evidenceRef }), evidence };
    }
    case "returned":
      break;
  }
  const { outcome, evidence: detail } = run.answer;
  const evidence = detail === undefined ? undefined : { kind: "transport", detail };
  const ref = evidence ? { evidence_ref: evidenceRef } : {};
  if (outcome.ok === "accepted") {
    if (contract.long_running) return { kind: "accepted", toolOperationId: outcome.operation_id };
    return {
      kind: "result",
      result: failure(callId, "INVALID_TOOL_RESULT", `${contract.name} answered "accepted" but is not a long-running tool`, { evidence_ref: evidenceRef }),
      evidence: { kind: "INVALID_TOOL_RESULT", detail: { operation_id: outcome.operation_id } },
    };
  }
  if (outcome.ok === false) {
    if (outcome.code === "OUTCOME_UNKNOWN") {
      if (tool.writes) return { kind: "unknown", cause: "connection_lost", message: outcome.message.slice(0, 1_024), ...(evidence ? { evidence } : {}) };
      // Nothing can have happened: a read that lost its connection is simply unavailable.
      return {
        kind: "result",
        result: failure(callId, "UPSTREAM_UNAVAILABLE", outcome.message.slice(0, 1_024), { retryable: true, ...ref }),
        ...(evidence ? { evidence } : {}),
      };
    }
    return {
      kind: "result",
      result: failure(callId, outcome.code, outcome.message.slice(0, 1_024), {
        ...(outcome.details ? { details: outcome.details } : {}),
        ...(outcome.retryable === undefined ? {} : { retryable: outcome.retryable }),
        ...ref,
      }),
      ...(evidence ? { evidence } : {}),
    };
  }
  const checked = registry.checkResult(tool, outcome.data);
  if (!checked.ok) {
    return {
      kind: "result",
      result: failure(
        callId,
        checked.code,
        checked.code === "RESULT_TOO_LARGE" ? checked.message : `${contract.name} returned a result that does not match its contract`,
        { evidence_ref: evidenceRef },
      ),
      evidence: { kind: checked.code, detail: { message: checked.message, violations: checked.violations } },
    };
  }
  return { kind: "result", result: success(callId, outcome.data, outcome.truncated ? { truncated: true } : {}) };
}
