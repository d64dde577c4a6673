import { hash } from "node:crypto";
import canonicalize from "canonicalize";

/**
 * RFC 8785 (JCS) canonical form of a JSON value. Throws TypeError for values JSON cannot represent
 * (undefined, functions, symbols, NaN/Infinity, BigInt, lone surrogates, cycles) wherever they occur:
 * those are programmer errors, not model input. Properties whose value is undefined are left out, as in JSON.
 */
export function canonicalJson(value: unknown): string {
  assertRepresentable(value, new Set());
  let text: string | undefined;
  try {
    text = canonicalize(value);
  } catch (error) {
    throw new TypeError(`value has no canonical JSON form: ${(error as Error).message}`, { cause: error });
  }
  if (text === undefined) throw new TypeError("value has no JSON representation");
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

// `canonicalize` silently drops functions and symbols nested in objects and prints "undefined" for a function
// in an array, which would hash a different value than the caller meant; refuse them instead.
function assertRepresentable(value: unknown, seen: Set<object>): void {
  switch (typeof value) {
    case "function":
    case "symbol":
    case "bigint":
      throw new TypeError(`a ${typeof value} has no JSON representation`);
    case "object": {
      if (value === null) return;
      if (seen.has(value)) throw new TypeError("a circular structure has no JSON representation");
      const json = (value as { toJSON?: unknown }).toJSON;
      if (typeof json === "function") {
        seen.add(value);
        assertRepresentable((json as () => unknown).call(value), seen);
        seen.delete(value);
        return;
      }
      seen.add(value);
      for (const item of Array.isArray(value) ? value : Object.values(value)) {
        if (item !== undefined) assertRepresentable(item, seen);
      }
      seen.delete(value);
      return;
    }
    default:
      return;
  }
}
