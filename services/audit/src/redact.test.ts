import { eventId, newCallId, newRunId, type ToolgateEvent } from "@toolgate/contracts";
import { REDACTED, ToolRegistry } from "@toolgate/registry";
import { describe, expect, it } from "vitest";
import { redactEvent, type ToolLookup } from "./redact.js";

const registry = ToolRegistry.from([
  {
    name: "send_email",
    version: "1.0.0",
    description: "Sends an email on the user's behalf; use only when asked to send one.",
    owner: "test",
    input_schema: {
      type: "object",
      properties: {
        to: { type: "string" },
        body: { type: "string" },
        auth: { type: "object", properties: { token: { type: "string" }, user: { type: "string" } } },
      },
    },
    output_schema: { type: "object", properties: { id: { type: "string" }, receipt: { type: "string" } } },
    side_effect: "external",
    risk: "high",
    timeout_ms: 1_000,
    idempotency: { kind: "keyed" },
    sensitive: ["/body", "/auth/token"],
    sensitive_results: ["/receipt"],
  },
  {
    name: "search_sources",
    version: "1.0.0",
    description: "Searches the corpus for sources; use to find documents.",
    owner: "test",
    input_schema: { type: "object", properties: { query: { type: "string" } } },
    output_schema: { type: "object" },
    side_effect: "read",
    risk: "low",
    timeout_ms: 1_000,
    idempotency: { kind: "natural" },
  },
]);
const tools: ToolLookup = (name, hash) => (hash ? registry.getByHash(hash) : registry.get(name));
const sendEmail = registry.get("send_email")!;

function event<T extends ToolgateEvent["type"]>(type: T, payload: unknown, tool = sendEmail.ref): ToolgateEvent {
  const callId = newCallId();
  return {
    v: 1,
    kind: "call",
    id: eventId(callId, type, 1),
    type,
    call_id: callId,
    run_id: newRunId(),
    seq: 1,
    attempt: 1,
    time: new Date().toISOString(),
    source: "orchestrator",
    principal: { tenant: "t", subject: "s", roles: [] },
    tool,
    payload,
  } as ToolgateEvent;
}

const proposed = (tool: string, argumentsJson: string) =>
  event("proposed", { provider_call_id: "c1", tool_name: tool, arguments_json: argumentsJson, context: {}, turn: 0 });

describe("redactEvent", () => {
  it("replaces the argument fields the contract marks sensitive, nested ones included, and keeps the rest", () => {
    const redacted = redactEvent(proposed("send_email", JSON.stringify({ to: "a@b.c", body: "secret plan", auth: { token: "t0k3n", user: "u" } })), tools);
    expect(redacted.kind === "call" && redacted.type === "proposed" && JSON.parse(redacted.payload.arguments_json)).toEqual({
      to: "a@b.c",
      body: REDACTED,
      auth: { token: REDACTED, user: "u" },
    });
  });

  it("redacts unparseable arguments of a tool with sensitive fields whole", () => {
    const redacted = redactEvent(proposed("send_email", '{"body": "secret'), tools);
    expect(redacted.kind === "call" && redacted.type === "proposed" && redacted.payload.arguments_json).toBe(JSON.stringify(REDACTED));
  });

  it("redacts an authorization's arguments by the exact contract version it names", () => {
    const authorized = event("authorized", { decision: { tool: sendEmail.ref }, signature: "s", arguments: { to: "a@b.c", body: "secret plan" } });
    const redacted = redactEvent(authorized, tools);
    expect(redacted.kind === "call" && redacted.type === "authorized" && redacted.payload.arguments).toEqual({ to: "a@b.c", body: REDACTED });
  });

  it("redacts the result fields the contract marks sensitive in completions, reconciliations and operations", () => {
    const result = { ok: true, data: { id: "m1", receipt: "rcpt-secret" }, retryable: false, call_id: "call_x" };
    for (const [type, payload] of [
      ["completed", { result, duration_ms: 1 }],
      ["reconciled", { outcome: "applied", result }],
      ["operation_updated", { operation_id: "op1", state: "succeeded", result }],
    ] as const) {
      const redacted = redactEvent(event(type, payload), tools) as { payload: { result: { data: unknown } } };
      expect(redacted.payload.result.data).toEqual({ id: "m1", receipt: REDACTED });
    }
    // A failure carries no tool data to redact.
    const failed = event("completed", { result: { ok: false, error: { code: "TIMEOUT", message: "m" }, retryable: true, call_id: "call_x" }, duration_ms: 1 });
    expect(redactEvent(failed, tools)).toBe(failed);
  });

  it("leaves tools without sensitive fields untouched", () => {
    const original = proposed("search_sources", '{"query":"x"}');
    expect(redactEvent(original, tools)).toBe(original);
  });
});
