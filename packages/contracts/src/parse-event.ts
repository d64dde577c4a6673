import { ToolgateEventSchema, type ToolgateEvent } from "./events.js";
import { jsonDepth } from "./json-limits.js";

/** Why a message on the bus is not a valid event; services log it and drop the message, never crash. */
export type EventRejection =
  | { reason: "too_large"; detail: string }
  | { reason: "invalid_json"; detail: string }
  | { reason: "invalid_envelope"; detail: string }
  | { reason: "subject_mismatch"; detail: string };

export type ParsedEvent = { ok: true; event: ToolgateEvent } | { ok: false; rejection: EventRejection };

const decoder = new TextDecoder("utf-8", { fatal: true });
/** A `\uD800`-`\uDFFF` escape: the only way a lone surrogate gets past the fatal UTF-8 decoder. */
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;
const LONE_SURROGATE = /\p{Cs}/u;
/**
 * The deepest event a consumer reads. Far beyond what the front doors let in (a request body nests at most 128
 * levels), and far within what the recursive code behind (canonical JSON, hashing, validation) can walk.
 */
export const MAX_EVENT_DEPTH = 1_000;

/**
 * Parses and validates one bus message. The size is checked before any parsing, so a huge payload costs
 * nothing; the result says why a message was refused instead of throwing.
 */
export function parseEvent(data: Uint8Array, maxBytes: number): ParsedEvent {
  if (data.byteLength > maxBytes) {
    return { ok: false, rejection: { reason: "too_large", detail: `${data.byteLength} bytes > limit ${maxBytes}` } };
  }
  let json: unknown;
  let text: string;
  try {
    text = decoder.decode(data);
    // Each level of valid JSON takes two characters, so a text this short cannot nest beyond the limit (and one
    // that is not JSON is refused by JSON.parse, which does not recurse): most events skip the scan.
    const depth = text.length > 2 * MAX_EVENT_DEPTH ? jsonDepth(text) : 0;
    if (depth > MAX_EVENT_DEPTH) return { ok: false, rejection: { reason: "invalid_json", detail: `nests ${depth} levels deep > limit ${MAX_EVENT_DEPTH}` } };
    json = JSON.parse(text);
  } catch (error) {
    return { ok: false, rejection: { reason: "invalid_json", detail: (error as Error).message.slice(0, 200) } };
  }
  // Events are I-JSON (RFC 7493): a lone surrogate has no canonical form (RFC 8785), so audit could never hash it.
  if (SURROGATE_ESCAPE.test(text) && hasLoneSurrogate(json)) {
    return { ok: false, rejection: { reason: "invalid_json", detail: "a string contains a lone UTF-16 surrogate" } };
  }
  const parsed = ToolgateEventSchema.safeParse(json);
  if (!parsed.success) {
    const issues = parsed.error.issues.slice(0, 5).map((i) => `${i.path.join("/") || "(root)"}: ${i.message}`);
    return { ok: false, rejection: { reason: "invalid_envelope", detail: issues.join("; ") } };
  }
  return { ok: true, event: parsed.data };
}

function hasLoneSurrogate(value: unknown): boolean {
  if (typeof value === "string") return LONE_SURROGATE.test(value);
  if (typeof value !== "object" || value === null) return false;
  if (Array.isArray(value)) return value.some(hasLoneSurrogate);
  return Object.entries(value).some(([k, v]) => LONE_SURROGATE.test(k) || hasLoneSurrogate(v));
}
