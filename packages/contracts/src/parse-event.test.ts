import { describe, expect, it } from "vitest";
import { eventId, type ToolgateEvent } from "./events.js";
import { newCallId, newRunId } from "./ids.js";
import { MAX_EVENT_DEPTH, parseEvent, type ParsedEvent } from "./parse-event.js";

const encoder = new TextEncoder();
const LIMIT = 64 * 1024;

const principal = { tenant: "acme", subject: "alice", roles: ["analyst"] };

function startedEvent(): ToolgateEvent {
  const callId = newCallId();
  return {
    v: 1,
    id: eventId(callId, "started", 1),
    kind: "call",
    type: "started",
    call_id: callId,
    run_id: newRunId(),
    seq: 3,
    attempt: 1,
    time: "2024-11-29T10:00:00.000Z",
    source: "executor",
    principal,
    payload: { executor_id: "executor-1", idempotency_key_hash: `sha256:${"d".repeat(64)}` },
  };
}

function bytes(value: unknown): Uint8Array {
  return encoder.encode(typeof value === "string" ? value : JSON.stringify(value));
}

function rejection(parsed: ParsedEvent): { reason: string; detail: string } {
  if (parsed.ok) throw new Error(`expected a rejection, got a ${parsed.event.kind}.${parsed.event.type} event`);
  return parsed.rejection;
}

/** A copy of a valid event with `change` applied to its JSON form. */
function mutated(change: (json: Record<string, unknown>) => void): Record<string, unknown> {
  const json = JSON.parse(JSON.stringify(startedEvent())) as Record<string, unknown>;
  change(json);
  return json;
}

describe("parseEvent", () => {
  it("accepts a valid event and returns it typed", () => {
    const event = startedEvent();
    const parsed = parseEvent(bytes(event), LIMIT);
    expect(parsed).toEqual({ ok: true, event });
  });

  it("checks the size before parsing anything", () => {
    // Invalid JSON above the limit: only a size check that runs first can answer too_large.
    const oversized = new Uint8Array(LIMIT + 1).fill(0x7b);
    expect(rejection(parseEvent(oversized, LIMIT)).reason).toBe("too_large");
    // A valid event one byte over the limit is refused; the same bytes at exactly the limit are accepted.
    const data = bytes(startedEvent());
    expect(rejection(parseEvent(data, data.byteLength - 1))).toEqual({
      reason: "too_large",
      detail: `${data.byteLength} bytes > limit ${data.byteLength - 1}`,
    });
    expect(parseEvent(data, data.byteLength).ok).toBe(true);
  });

  it.each([
    ["not JSON", bytes("hello")],
    ["truncated JSON", bytes('{"v":1,')],
    ["empty", new Uint8Array(0)],
    ["invalid UTF-8", Uint8Array.of(0x7b, 0xff, 0xfe, 0x7d)],
  ])("refuses %s as invalid_json", (_name, data) => {
    expect(rejection(parseEvent(data, LIMIT)).reason).toBe("invalid_json");
  });

  it("refuses a lone UTF-16 surrogate, which has no canonical JSON form, as invalid_json", () => {
    const event = startedEvent();
    const text = JSON.stringify(event).replace('"executor-1"', '"executor-\\ud800"');
    expect(text).toContain("\\ud800");
    expect(rejection(parseEvent(bytes(text), LIMIT)).reason).toBe("invalid_json");
    const inKey = JSON.stringify(event).replace('"executor_id"', '"\\uDC00":1,"executor_id"');
    expect(rejection(parseEvent(bytes(inKey), LIMIT)).reason).toBe("invalid_json");
  });

  it("refuses an event nested deeper than any consumer may walk before parsing it, whatever else it holds", () => {
    const nest = (depth: number) => `${"[".repeat(depth)}"\\ud800"${"]".repeat(depth)}`;
    const withValue = (value: string) => JSON.stringify(startedEvent()).replace('"executor-1"', value);
    // A lone surrogate 50,000 levels down: the surrogate check would recurse through all of them.
    const deep = rejection(parseEvent(bytes(withValue(nest(50_000))), 1024 * 1024));
    expect(deep).toEqual({ reason: "invalid_json", detail: `nests 50002 levels deep > limit ${MAX_EVENT_DEPTH}` });
    // At the limit, the event is read (and refused only for what it is: here, not a string where one belongs).
    expect(rejection(parseEvent(bytes(withValue(`${"[".repeat(MAX_EVENT_DEPTH - 2)}1${"]".repeat(MAX_EVENT_DEPTH - 2)}`)), LIMIT)).reason).toBe(
      "invalid_envelope",
    );
  });

  it("refuses a short text of unclosed brackets as not JSON, without scanning its depth", () => {
    const open = "[".repeat(2 * MAX_EVENT_DEPTH - 1);
    expect(rejection(parseEvent(bytes(open), LIMIT)).reason).toBe("invalid_json");
    expect(rejection(parseEvent(bytes(open), LIMIT))).not.toHaveProperty("detail", expect.stringContaining("levels deep"));
  });

  it("accepts escaped surrogate pairs and a literal backslash-u in a string", () => {
    const event = startedEvent();
    const pair = JSON.stringify(event).replace('"executor-1"', '"executor-\\ud83d\\ude00"');
    const parsedPair = parseEvent(bytes(pair), LIMIT);
    expect(parsedPair.ok && parsedPair.event.kind === "call" && parsedPair.event.type === "started" && parsedPair.event.payload.executor_id).toBe(
      "executor-\u{1f600}",
    );
    const literal = JSON.stringify({ ...event, payload: { ...event.payload, executor_id: "executor-\\ud800" } });
    const parsedLiteral = parseEvent(bytes(literal), LIMIT);
    expect(parsedLiteral.ok && parsedLiteral.event.kind === "call" && parsedLiteral.event.type === "started" && parsedLiteral.event.payload.executor_id).toBe(
      "executor-\\ud800",
    );
  });

  it.each<[string, (json: Record<string, unknown>) => void]>([
    ["a JSON value that is not an object", (j) => Object.keys(j).forEach((k) => delete j[k])],
    ["a missing payload", (j) => delete j.payload],
    ["a missing principal", (j) => delete j.principal],
    ["a wrong envelope version", (j) => (j.v = 2)],
    ["a seq of 0", (j) => (j.seq = 0)],
    ["a fractional attempt", (j) => (j.attempt = 1.5)],
    ["a time that is not ISO 8601", (j) => (j.time = "yesterday")],
    ["an unknown source service", (j) => (j.source = "model")],
    ["a payload field of the wrong type", (j) => ((j.payload as Record<string, unknown>).executor_id = 7)],
    ["a payload of another event type", (j) => (j.payload = { provider_call_id: "x", ok: true })],
    ["an unknown type", (j) => (j.type = "exploded")],
    ["a run event type on a call event", (j) => (j.type = "model_responded")],
    ["an unknown kind", (j) => (j.kind = "tool")],
    ["a call event without call_id", (j) => delete j.call_id],
    ["a call id that is not call_<ULID>", (j) => (j.call_id = "call_123")],
    ["a provider's call id in place of the call id", (j) => (j.call_id = "toolu_01.A*>")],
    [
      "a call id with a lowercase ULID",
      (j) =>
        (j.call_id = String(j.call_id)
          .toLowerCase()
          .replace(/^call_/, "call_")),
    ],
    ["a run id that is not run_<ULID>", (j) => (j.run_id = "run_01JDQ3JZ4E7W8A2B9C5D6F0G1I")],
    ["an empty event id", (j) => (j.id = "")],
    ["an event id with a line break (it becomes the Nats-Msg-Id header)", (j) => (j.id = "x\r\nNats-Expected-Stream: OTHER")],
    ["an event id with spaces", (j) => (j.id = "an event id")],
    ["a malformed args hash", (j) => (j.args_hash = "md5:abc")],
  ])("refuses %s as invalid_envelope", (_name, change) => {
    const json = mutated(change);
    const parsed = parseEvent(bytes(json), LIMIT);
    expect(rejection(parsed).reason).toBe("invalid_envelope");
  });

  it("refuses a JSON array, string or null as invalid_envelope", () => {
    for (const text of ["[]", '"event"', "null", "42"]) {
      expect(rejection(parseEvent(bytes(text), LIMIT)).reason).toBe("invalid_envelope");
    }
  });

  it("names the offending field in the detail", () => {
    const detail = rejection(parseEvent(bytes(mutated((j) => delete j.call_id)), LIMIT)).detail;
    expect(detail).toContain("call_id");
  });
});
