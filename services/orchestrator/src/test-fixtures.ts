import { newRunId } from "@toolgate/contracts";
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
