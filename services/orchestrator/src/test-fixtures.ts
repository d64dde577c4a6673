import { newRunId } from "@toolgate/contracts";
import type { ToolContractInput } from "@toolgate/registry";
import type { RunRecord } from "./run-store.js";

/**
 * A run record as the orchestrator stores it, for the store's integration tests: a managed run (`running`,
 * awaiting the model) unless `overrides` say otherwise; a host-driven one is `{ status: "external" }`.
 */
export function runRecord(overrides: Partial<RunRecord> = {}): RunRecord {
  const now = new Date();
  const external = overrides.status === "external";
  return {
    _id: newRunId(),
    principal: { tenant: "acme", subject: "alice", roles: ["researcher"] },
    model: external ? "external" : "scripted:loop-varied",
    context: {},
    input: "",
    status: "running",
    turn: 0,
    awaiting: external ? "tools" : "model",
    responses: [],
    tool_calls: 0,
    budgets: { max_turns: 10, max_tool_calls: 10, max_wall_clock_ms: 600_000, max_tokens: 1_000, max_identical_calls: 3, max_approval_wait_ms: 600_000 },
    usage: { turns: 0, tool_calls: 0, tokens: 0, signatures: {} },
    created_at: now,
    updated_at: now,
    ...overrides,
  };
}

/** A low-risk contract with one short string argument `q`: `lookup` reads, `note` writes. */
export function testContract(name: "lookup" | "note"): ToolContractInput {
  const reads = name === "lookup";
  return {
    name,
    version: "1.0.0",
    description: reads ? "Looks a thing up. Use it to read; never to change anything." : "Writes a note. Use it to keep something; never to look anything up.",
    owner: "test",
    input_schema: { type: "object", properties: { q: { type: "string", maxLength: 64 } }, required: ["q"], additionalProperties: false },
    output_schema: { type: "object", properties: {}, additionalProperties: true },
    side_effect: reads ? "read" : "write",
    risk: "low",
    timeout_ms: 1_000,
    idempotency: { kind: "natural" },
  };
}
