import { eventId, newCallId, newRunId, type ToolgateEvent } from "@toolgate/contracts";
import { describe, expect, it } from "vitest";
import { redactEvent, REDACTED } from "./redact.js";

const sensitive = (tool: string) => (tool === "send_email" ? ["/body", "/auth/token"] : undefined);

function proposed(tool: string, argumentsJson: string): ToolgateEvent {
  const callId = newCallId();
  return {
    v: 1,
    kind: "call",
    id: eventId(callId, "proposed", 1),
    type: "proposed",
    call_id: callId,
    run_id: newRunId(),
    seq: 1,
    attempt: 1,
    time: new Date().toISOString(),
    source: "orchestrator",
    principal: { tenant: "t", subject: "s", roles: [] },
    payload: { provider_call_id: "c1", tool_name: tool, arguments_json: argumentsJson, context: {}, turn: 0 },
  };
}

describe("redactEvent", () => {
  it("replaces the fields the contract marks sensitive, nested ones included, and keeps the rest", () => {
    const event = redactEvent(proposed("send_email", JSON.stringify({ to: "a@b.c", body: "secret plan", auth: { token: "t0k3n", user: "u" } })), sensitive);
    expect(event.kind === "call" && event.type === "proposed" && JSON.parse(event.payload.arguments_json)).toEqual({
      to: "a@b.c",
      body: REDACTED,
      auth: { token: REDACTED, user: "u" },
    });
  });

  it("redacts unparseable arguments of a tool with sensitive fields whole", () => {
    const event = redactEvent(proposed("send_email", '{"body": "secret'), sensitive);
    expect(event.kind === "call" && event.type === "proposed" && event.payload.arguments_json).toBe(JSON.stringify(REDACTED));
  });

  it("leaves tools without sensitive fields untouched", () => {
    const original = proposed("search_sources", '{"query":"x"}');
    expect(redactEvent(original, sensitive)).toBe(original);
  });
});
