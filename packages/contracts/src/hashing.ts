import { hash } from "node:crypto";

/**
 * RFC 8785 (JCS) canonical form of a JSON value. Throws TypeError for values JSON cannot represent
 * (undefined, functions, symbols, NaN/Infinity, BigInt, lone surrogates, cycles) wherever they occur:
 * those are programmer errors, not model input. Properties whose value is undefined are left out, and undefined
 * in an array is null, as in JSON.
 *
 * One pass of its own rather than the `canonicalize` package behind a check of its own: every event audit stores,
 * and every decision and argument hash, goes through here, and the two passes (with the package's
 * character-by-character surrogate scan) took ~15 µs for a typical event against ~8 µs now. The package stays
 * the reference its tests compare with (`hashing.test.ts`).
 */
export function canonicalJson(value: unknown): string {
  if (value === undefined) throw new TypeError("value has no JSON representation");
  return serialize(value, new Set());
}

/*
 * RFC 8785 is JSON.stringify's serialization of strings and numbers (ECMAScript's Number::toString) with object
 * members sorted by their names' UTF-16 code units, which is what Array.prototype.sort does with strings.
 */
function serialize(value: unknown, ancestors: Set<object>): string {
  switch (typeof value) {
    case "string":
      if (!value.isWellFormed()) throw new TypeError("a string with a lone surrogate has no canonical JSON form");
      return JSON.stringify(value);
    case "number":
      if (!Number.isFinite(value)) throw new TypeError(`${value} has no JSON representation`);
      return JSON.stringify(value);
    case "boolean":
      return value ? "true" : "false";
    case "object":
      return value === null ? "null" : serializeObject(value, ancestors);
    default:
      throw new TypeError(`a ${typeof value} has no JSON representation`);
  }
}

function serializeObject(value: object, ancestors: Set<object>): string {
  if (ancestors.has(value)) throw new TypeError("a circular structure has no JSON representation");
  const toJSON = (value as { toJSON?: unknown }).toJSON;
  ancestors.add(value);
  let text: string;
  if (typeof toJSON === "function") {
    const replaced: unknown = toJSON.call(value);
    if (replaced === undefined) throw new TypeError("a value whose toJSON returns undefined has no JSON representation");
    text = serialize(replaced, ancestors);
  } else if (Array.isArray(value)) {
    text = "[";
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      text += (i === 0 ? "" : ",") + (item === undefined ? "null" : serialize(item, ancestors));
    }
    text += "]";
  } else {
    const record = value as Record<string, unknown>;
    text = "{";
    for (const key of Object.keys(record).sort()) {
      const member = record[key];
      if (member === undefined) continue;
      text += (text.length === 1 ? "" : ",") + serialize(key, ancestors) + ":" + serialize(member, ancestors);
    }
    text += "}";
  }
  ancestors.delete(value);
  return text;
}

/** `sha256:<hex>` of the canonical form: equal for JSON values that differ only in key order or number spelling. */
export function canonicalHash(value: unknown): string {
  return sha256(canonicalJson(value));
}

/** `sha256:<hex>` of a UTF-8 string. */
export function sha256(text: string): string {
  return `sha256:${hash("sha256", text)}`;
}
