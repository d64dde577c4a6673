import { readdirSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { ERROR_CODES, ErrorCodeSchema } from "./error-codes.js";
import { eventId, refusalEventId } from "./events.js";
import { parseEvent } from "./parse-event.js";
import { FailureResultSchema, ResultEnvelopeSchema, SuccessResultSchema } from "./result-envelope.js";
import { CALL_EVENT_TYPES, RUN_EVENT_TYPES } from "./subjects.js";

// Golden examples of what is on the wire. A schema change that refuses one of them, or silently drops one of
// their fields, breaks every consumer that still sends or stores that shape: make such changes a new version.
const FIXTURES = new URL("./__fixtures__/", import.meta.url);
const encoder = new TextEncoder();

function fixture(name: string): { text: string; json: Record<string, unknown> } {
  const text = readFileSync(new URL(name, FIXTURES), "utf8");
  return { text, json: JSON.parse(text) as Record<string, unknown> };
}

/**
 * The closed error-code set and each code's default retryability. Adding a code is compatible and is done by
 * appending it here; renaming, removing or flipping `retryable` is not, and must fail this test.
 */
const PINNED_ERROR_CODES = {
  UNKNOWN_TOOL: false,
  TOOL_DISABLED: false,
  INVALID_JSON: false,
  INVALID_ARGUMENTS: false,
  OBJECT_NOT_FOUND: false,
  AMBIGUOUS_OBJECT: false,
  PERMISSION_DENIED: false,
  STATE_CONFLICT: false,
  APPROVAL_REQUIRED: false,
  APPROVAL_DENIED: false,
  APPROVAL_EXPIRED: false,
  APPROVAL_MISMATCH: false,
  IDEMPOTENCY_CONFLICT: false,
  RATE_LIMITED: true,
  TIMEOUT: true,
  OUTCOME_UNKNOWN: false,
  EXECUTION_ERROR: false,
  UPSTREAM_UNAVAILABLE: true,
  INVALID_TOOL_RESULT: false,
  RESULT_TOO_LARGE: false,
  BUDGET_EXCEEDED: false,
  APPROVAL_CONSUMED: false,
} as const;

const eventFixtures = [...CALL_EVENT_TYPES.map((t) => `call.${t}.json`), ...RUN_EVENT_TYPES.map((t) => `run.${t}.json`)];

describe("golden fixtures", () => {
  it("has exactly one fixture per event type plus the two result envelopes", () => {
    const files = readdirSync(FIXTURES)
      .filter((f) => f.endsWith(".json"))
      .sort();
    expect(files).toEqual([...eventFixtures, "result.failure.json", "result.success.json"].sort());
  });

  it.each(eventFixtures)("%s parses unchanged", (name) => {
    const { text, json } = fixture(name);
    const parsed = parseEvent(encoder.encode(text), 64 * 1024);
    if (!parsed.ok) throw new Error(`${name}: ${parsed.rejection.reason}: ${parsed.rejection.detail}`);
    // Deep equality also catches a field the schema no longer knows (zod would strip it).
    expect(parsed.event).toEqual(json);
    const [kind, type] = name.split(".") as [string, string];
    expect(parsed.event.kind).toBe(kind);
    expect(parsed.event.type).toBe(type);
    const chain = parsed.event.kind === "call" ? parsed.event.call_id : parsed.event.run_id;
    const id =
      parsed.event.type === "event_refused"
        ? refusalEventId(chain, parsed.event.source, parsed.event.payload.stream_seq)
        : eventId(chain, type, parsed.event.attempt);
    expect(parsed.event.id).toBe(id);
  });

  it("result.success.json is a success envelope", () => {
    const { json } = fixture("result.success.json");
    expect(ResultEnvelopeSchema.parse(json)).toEqual(json);
    expect(SuccessResultSchema.safeParse(json).success).toBe(true);
    expect(FailureResultSchema.safeParse(json).success).toBe(false);
  });

  it("result.failure.json is a failure envelope with JSON-pointer details", () => {
    const { json } = fixture("result.failure.json");
    expect(ResultEnvelopeSchema.parse(json)).toEqual(json);
    expect(FailureResultSchema.safeParse(json).success).toBe(true);
    expect(SuccessResultSchema.safeParse(json).success).toBe(false);
  });

  it("an error code outside the closed set is refused", () => {
    const { json } = fixture("result.failure.json");
    const error = { ...(json.error as Record<string, unknown>), code: "SOMETHING_ELSE" };
    expect(ResultEnvelopeSchema.safeParse({ ...json, error }).success).toBe(false);
  });
});

describe("error codes", () => {
  it("equal the pinned set, with the pinned default retryability", () => {
    const actual = Object.fromEntries(Object.entries(ERROR_CODES).map(([code, meta]) => [code, meta.retryable]));
    expect(actual).toEqual(PINNED_ERROR_CODES);
    expect([...ErrorCodeSchema.options].sort()).toEqual(Object.keys(PINNED_ERROR_CODES).sort());
  });

  it("each have a description", () => {
    for (const meta of Object.values(ERROR_CODES)) expect(meta.description.length).toBeGreaterThan(10);
  });
});
