import { newCallId } from "@toolgate/contracts";
import { ToolRegistry, type ToolContractInput } from "@toolgate/registry";
import { describe, expect, it } from "vitest";
import { judgeRun } from "./judge-run.js";
import type { ToolRun } from "./run-tool.js";
import { NotAppliedError } from "./thrown-failure.js";

const contract = (over: Partial<ToolContractInput>): ToolContractInput => ({
  name: "create_ticket",
  version: "1.0.0",
  description: "Creates a ticket. Use when asked to file an issue; do not use to search tickets.",
  owner: "test",
  input_schema: { type: "object", additionalProperties: false },
  output_schema: { type: "object", properties: { id: { type: "string" } }, required: ["id"], additionalProperties: false },
  side_effect: "write",
  risk: "low",
  timeout_ms: 1_000,
  idempotency: { kind: "keyed" },
  limits: { max_argument_bytes: 1_024, max_result_bytes: 64, max_depth: 4 },
  ...over,
});

const registry = ToolRegistry.from([
  contract({}),
  contract({ name: "read_ticket", side_effect: "read", idempotency: { kind: "natural" } }),
  contract({ name: "long_job", long_running: true }),
]);
const write = registry.get("create_ticket")!;
const read = registry.get("read_ticket")!;
const job = registry.get("long_job")!;
const callId = newCallId();
const returned = (outcome: Extract<ToolRun, { kind: "returned" }>["answer"]["outcome"], evidence?: Record<string, unknown>): ToolRun => ({
  kind: "returned",
  answer: evidence ? { outcome, evidence } : { outcome },
  durationMs: 1,
});

describe("judgeRun", () => {
  it("makes a timed-out write an unknown outcome and a timed-out read a retryable TIMEOUT", () => {
    expect(judgeRun({ kind: "timed_out", durationMs: 1_000 }, write, registry, callId, "evd")).toMatchObject({ kind: "unknown", cause: "timeout" });
    expect(judgeRun({ kind: "timed_out", durationMs: 1_000 }, read, registry, callId, "evd")).toMatchObject({
      kind: "result",
      result: { ok: false, error: { code: "TIMEOUT" }, retryable: true },
    });
  });

  it("keeps an exception's message and stack out of the result, in evidence only", () => {
    const thrown = (error: unknown): ToolRun => ({ kind: "threw", error, durationMs: 1 });
    const secret = new Error("password=hunter2 at /srv/x.ts:1");
    const judged = judgeRun(thrown(secret), read, registry, callId, "evd_1");
    expect(judged).toMatchObject({ kind: "result", result: { error: { code: "EXECUTION_ERROR", message: "read_ticket failed" }, evidence_ref: "evd_1" } });
    // A write's exception leaves its effect open: unknown, with the same care for what the model sees.
    const unknown = judgeRun(thrown(secret), write, registry, callId, "evd_1");
    expect(unknown).toMatchObject({ kind: "unknown", cause: "interrupted", evidence: { kind: "exception" } });
    for (const j of [judged, unknown]) {
      expect(JSON.stringify(j.kind === "result" ? j.result : j.kind === "unknown" ? j.message : j)).not.toContain("hunter2");
      expect(JSON.stringify((j as { evidence?: unknown }).evidence)).toContain("hunter2");
    }
  });

  it("makes a write that threw a connection error an unknown outcome, and one that says it was not applied a definite failure", () => {
    const reset = Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET", syscall: "read" });
    expect(judgeRun({ kind: "threw", error: reset, durationMs: 1 }, write, registry, callId, "evd")).toMatchObject({
      kind: "unknown",
      cause: "connection_lost",
      evidence: { kind: "exception", detail: { code: "ECONNRESET" } },
    });
    const refused = new NotAppliedError("the ticket title was refused before anything was written");
    expect(judgeRun({ kind: "threw", error: refused, durationMs: 1 }, write, registry, callId, "evd")).toMatchObject({
      kind: "result",
      result: { ok: false, error: { code: "EXECUTION_ERROR" }, retryable: false },
    });
    // A read that threw stays a definite failure, whatever the error.
    expect(judgeRun({ kind: "threw", error: reset, durationMs: 1 }, read, registry, callId, "evd")).toMatchObject({
      kind: "result",
      result: { error: { code: "EXECUTION_ERROR" } },
    });
  });

  it("forwards data only when it matches the output schema and the size limit", () => {
    expect(judgeRun(returned({ ok: true, data: { id: "T-1" } }), write, registry, callId, "evd")).toMatchObject({ result: { ok: true, data: { id: "T-1" } } });
    expect(judgeRun(returned({ ok: true, data: { id: 7 } }), write, registry, callId, "evd")).toMatchObject({
      result: { ok: false, error: { code: "INVALID_TOOL_RESULT" } },
    });
    expect(judgeRun(returned({ ok: true, data: { id: "x".repeat(100) } }), write, registry, callId, "evd")).toMatchObject({
      result: { ok: false, error: { code: "RESULT_TOO_LARGE" } },
    });
    expect(judgeRun(returned({ ok: true, data: { id: "T" }, truncated: true }), write, registry, callId, "evd")).toMatchObject({ result: { truncated: true } });
  });

  it("accepts an operation id only from a long-running tool", () => {
    expect(judgeRun(returned({ ok: "accepted", operation_id: "job-1" }), job, registry, callId, "evd")).toEqual({ kind: "accepted", toolOperationId: "job-1" });
    expect(judgeRun(returned({ ok: "accepted", operation_id: "job-1" }), write, registry, callId, "evd")).toMatchObject({
      result: { ok: false, error: { code: "INVALID_TOOL_RESULT" } },
    });
  });

  it("treats a lost connection as unknown for a write and as unavailable for a read", () => {
    const lost = returned({ ok: false, code: "OUTCOME_UNKNOWN", message: "connection reset" }, { error: "ECONNRESET" });
    expect(judgeRun(lost, write, registry, callId, "evd")).toMatchObject({ kind: "unknown", cause: "connection_lost", evidence: { kind: "transport" } });
    expect(judgeRun(lost, read, registry, callId, "evd")).toMatchObject({
      result: { error: { code: "UPSTREAM_UNAVAILABLE" }, retryable: true, evidence_ref: "evd" },
    });
  });

  it("keeps a tool's typed failure with its retry hint", () => {
    const judged = judgeRun(
      returned({ ok: false, code: "RATE_LIMITED", message: "slow down", details: { retry_after_ms: 500 } }),
      write,
      registry,
      callId,
      "evd",
    );
    expect(judged).toMatchObject({ result: { ok: false, error: { code: "RATE_LIMITED", details: { retry_after_ms: 500 } }, retryable: true } });
  });
});
