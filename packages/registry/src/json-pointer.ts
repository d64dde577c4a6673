import type { JsonValue } from "@toolgate/contracts";

/**
 * RFC 6901 JSON pointers, resolved one strict way for every service: a token names an object's *own* property
 * (so `/constructor` and `/__proto__` are keys like any other, never `Object.prototype`), an array index is
 * canonical (`0`, `17`; never `01`, `+1`, `1e0`) and inside the array, and `-` (the element after the last)
 * names nothing. Tokens are unescaped `~1` → `/` first, then `~0` → `~`, so `~01` is the key `~1`.
 */

/** The pointer syntax of RFC 6901: empty (the whole document) or `/`-prefixed tokens with `~` escaped as `~0`/`~1`. */
export const JSON_POINTER_PATTERN = /^(\/([^~/]|~[01])*)*$/;

const ARRAY_INDEX = /^(0|[1-9][0-9]*)$/;

/** The unescaped tokens of `pointer`, or undefined when it is not a JSON pointer. */
export function pointerTokens(pointer: string): string[] | undefined {
  if (!JSON_POINTER_PATTERN.test(pointer)) return undefined;
  if (pointer === "") return [];
  return pointer
    .slice(1)
    .split("/")
    .map((token) => token.replace(/~1/g, "/").replace(/~0/g, "~"));
}

/** The pointer of `tokens` (the inverse of {@link pointerTokens}). */
export function pointerOf(tokens: readonly (string | number)[]): string {
  return tokens.map((token) => `/${String(token).replace(/~/g, "~0").replace(/\//g, "~1")}`).join("");
}

/** The value `pointer` names in `document`, or undefined when the pointer is malformed or any step is missing. */
export function resolvePointer(document: JsonValue, pointer: string): JsonValue | undefined {
  const tokens = pointerTokens(pointer);
  if (tokens === undefined) return undefined;
  let current: JsonValue | undefined = document;
  for (const token of tokens) {
    current = current === undefined ? undefined : childOf(current, token);
    if (current === undefined) return undefined;
  }
  return current;
}

/**
 * A copy of `document` with the value at each of `pointers` replaced by `replacement`; a pointer that names
 * nothing changes nothing, and the empty pointer replaces the whole document. Never mutates `document`.
 */
export function replaceAtPointers(document: JsonValue, pointers: readonly string[], replacement: JsonValue): JsonValue {
  if (pointers.length === 0) return document;
  const copy = structuredClone(document);
  for (const pointer of pointers) {
    const tokens = pointerTokens(pointer);
    if (tokens === undefined) continue;
    if (tokens.length === 0) return replacement;
    let parent: JsonValue | undefined = copy;
    for (const token of tokens.slice(0, -1)) parent = parent === undefined ? undefined : childOf(parent, token);
    const last = tokens.at(-1)!;
    if (parent === undefined || childOf(parent, last) === undefined) continue;
    // The property exists and is the parent's own, so assigning it never reaches a prototype's setter.
    if (Array.isArray(parent)) parent[Number(last)] = replacement;
    else if (parent !== null && typeof parent === "object") parent[last] = replacement;
  }
  return copy;
}

function childOf(value: JsonValue, token: string): JsonValue | undefined {
  if (value === null || typeof value !== "object") return undefined;
  if (Array.isArray(value)) return ARRAY_INDEX.test(token) && Number(token) < value.length ? value[Number(token)] : undefined;
  return Object.hasOwn(value, token) ? value[token] : undefined;
}
