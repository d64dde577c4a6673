/**
 * Why a string from outside cannot be taken as it is. A NUL cannot be stored (the Mongo-compatible store on
 * PostgreSQL refuses U+0000 anywhere, MongoDB in a key); an unpaired surrogate cannot travel in an event (events
 * are I-JSON); other control characters are no part of an id, a name or a key, where they only hide what it says.
 */
export type UnsafeTextReason = "nul" | "control_character" | "lone_surrogate";

/** The first character of a string that makes it unsafe, where it is, and why. */
export interface UnsafeText {
  reason: UnsafeTextReason;
  /** UTF-16 index of the character in the string. */
  index: number;
  /** The character as `U+XXXX`. */
  codePoint: string;
}

/** What a string is for: an id, a name or a key refuses every control character; any other text only NUL. */
export type TextRole = "identifier" | "text";

// A fast path: most strings hold none of these, and one regular-expression test costs less than a scan.
/* eslint-disable no-control-regex -- matching control characters is the point */
const SUSPECT_IDENTIFIER = /[\u0000-\u001f\u007f-\u009f\ud800-\udfff]/;
const SUSPECT_TEXT = /[\u0000\ud800-\udfff]/;
const UNPRINTABLE_IN_POINTER = /[\u0000-\u001f\u007f-\u009f\ud800-\udfff]/gu;
/* eslint-enable no-control-regex */

/**
 * The first character that makes `value` unsafe in `role`: a NUL, an unpaired UTF-16 surrogate, or (for an
 * identifier) any other C0 or C1 control character or DEL. Undefined for a safe string. Never throws.
 */
export function unsafeText(value: string, role: TextRole): UnsafeText | undefined {
  if (!(role === "identifier" ? SUSPECT_IDENTIFIER : SUSPECT_TEXT).test(value)) return undefined;
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const next = i + 1 < value.length ? value.charCodeAt(i + 1) : 0;
      if (next >= 0xdc00 && next <= 0xdfff) {
        i++;
        continue;
      }
      return at("lone_surrogate", i, c);
    }
    if (c >= 0xdc00 && c <= 0xdfff) return at("lone_surrogate", i, c);
    if (c === 0) return at("nul", i, c);
    if (role === "identifier" && (c < 0x20 || (c >= 0x7f && c <= 0x9f))) return at("control_character", i, c);
  }
  return undefined;
}

/** An unsafe string found inside a JSON value: RFC 6901 pointer to it (the key itself, for a key). */
export interface UnsafeTextAt extends UnsafeText {
  pointer: string;
  /** Whether the unsafe string is an object key (else a string value). */
  key: boolean;
}

/**
 * The first unsafe string in a JSON-like value, depth first: every object key is checked as an identifier, every
 * string value as `values` says (`"none"`: not at all). Undefined when there is none. Never throws; a value
 * nested deeper than `maxDepth` is not looked into (the caller's own limits refuse it).
 */
export function findUnsafeText(value: unknown, values: TextRole | "none", base = "", maxDepth = 256): UnsafeTextAt | undefined {
  if (typeof value === "string") {
    if (values === "none") return undefined;
    const found = unsafeText(value, values);
    return found && { ...found, pointer: base, key: false };
  }
  if (typeof value !== "object" || value === null || maxDepth <= 0) return undefined;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = findUnsafeText(value[i], values, `${base}/${i}`, maxDepth - 1);
      if (found) return found;
    }
    return undefined;
  }
  for (const [key, item] of Object.entries(value)) {
    const pointer = `${base}/${key.replace(/~/g, "~0").replace(/\//g, "~1")}`;
    const unsafeKey = unsafeText(key, "identifier");
    if (unsafeKey) return { ...unsafeKey, pointer, key: true };
    const found = findUnsafeText(item, values, pointer, maxDepth - 1);
    if (found) return found;
  }
  return undefined;
}

const NAMES: Record<UnsafeTextReason, string> = {
  nul: "a NUL character",
  control_character: "a control character",
  lone_surrogate: "an unpaired UTF-16 surrogate",
};

/**
 * One line for a person: `what` (e.g. "the tool name") and what it holds where, with the character escaped so
 * that the message itself is safe to print, store and send.
 */
export function describeUnsafeText(what: string, found: UnsafeText): string {
  return `${what} contains ${NAMES[found.reason]} (${found.codePoint}) at index ${found.index}`;
}

/** A pointer made safe to show: every character an identifier may not hold, as `\uXXXX`. */
export function printablePointer(pointer: string): string {
  // With the u flag a surrogate pair is one code point: only unpaired halves match the surrogate range.
  return pointer.replace(UNPRINTABLE_IN_POINTER, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

function at(reason: UnsafeTextReason, index: number, code: number): UnsafeText {
  return { reason, index, codePoint: `U+${code.toString(16).toUpperCase().padStart(4, "0")}` };
}
