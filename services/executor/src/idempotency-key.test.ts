import { newCallId, newRunId, type Decision } from "@toolgate/contracts";
import { ToolContractSchema } from "@toolgate/registry";
import { describe, expect, it } from "vitest";
import { idempotencyKey } from "./idempotency-key.js";

const base = ToolContractSchema.parse({
  name: "create_ticket",
  version: "1.0.0",
  description: "Creates a ticket. Use when asked to file an issue; do not use to search tickets.",
  owner: "test",
  input_schema: { type: "object", additionalProperties: false },
  output_schema: { type: "object" },
  side_effect: "write",
  risk: "medium",
  timeout_ms: 1000,
  idempotency: { kind: "keyed" },
});

function decision(): Decision {
  return {
    decision_id: "d",
    call_id: newCallId(),
    run_id: newRunId(),
    tool: { name: "create_ticket", version: "1.0.0", hash: `sha256:${"a".repeat(64)}` },
    args_hash: `sha256:${"b".repeat(64)}`,
    principal: { tenant: "acme", subject: "alice", roles: [] },
    context: { task_id: "task_1" },
    policy_version: "p",
    issued_at: new Date().toISOString(),
    expires_at: new Date().toISOString(),
    key_id: "k",
  };
}

describe("idempotencyKey", () => {
  it("defaults to tool, run id and call id: a redelivery of the same call reuses it, another call does not", () => {
    const d = decision();
    expect(idempotencyKey(base, d, { title: "x" })).toBe(`create_ticket:${d.run_id}:${d.call_id}`);
    expect(idempotencyKey(base, { ...d, call_id: newCallId() }, { title: "x" })).not.toBe(idempotencyKey(base, d, { title: "x" }));
  });

  it("renders a business-key template from trusted fields and validated arguments only", () => {
    const contract = { ...base, idempotency: { kind: "keyed" as const, key_template: "{tenant}:{task_id}:{args:/title}" } };
    const d = decision();
    expect(idempotencyKey(contract, d, { title: "Disk full", user_id: "mallory" })).toBe('create_ticket:acme:task_1:"Disk full"');
    // Two calls of the same business operation share the key.
    expect(idempotencyKey(contract, { ...decision(), principal: d.principal }, { title: "Disk full" })).toBe(
      idempotencyKey(contract, d, { title: "Disk full" }),
    );
  });

  it("refuses an unknown placeholder instead of silently leaving it out", () => {
    const contract = { ...base, idempotency: { kind: "keyed" as const, key_template: "{user_id}" } };
    expect(() => idempotencyKey(contract, decision(), {})).toThrow(/unknown placeholder/);
  });
});
