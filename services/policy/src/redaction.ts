import type { JsonValue } from "@toolgate/contracts";

/** What replaces a value the contract marks sensitive. */
export const REDACTED = "[redacted]";

/** Characters a human cannot see or that reorder text on screen: zero-width, bidirectional controls, BOM. */
const INVISIBLE = /[\u00AD\u180E\u200B-\u200F\u202A-\u202E\u2060-\u2064\u2066-\u2069\uFEFF]/u;

/**
 * A copy of `args` with every value at one of the contract's sensitive pointers replaced by {@link REDACTED}
 * (a pointer into an array element or an absent value changes nothing). Never mutates `args`.
 */
export function redactArguments(args: Record<string, JsonValue>, sensitive: readonly string[]): Record<string, JsonValue> {
  const copy = structuredClone(args);
  for (const pointer of sensitive) {
    // The whole argument object is sensitive: show nothing of it.
    if (pointer === "") return { [REDACTED]: REDACTED };
    const tokens = pointer
      .slice(1)
      .split("/")
      .map((t) => t.replace(/~1/g, "/").replace(/~0/g, "~"));
    let parent: JsonValue | undefined = copy;
    for (const token of tokens.slice(0, -1)) parent = child(parent, token);
    const last = tokens.at(-1)!;
    if (Array.isArray(parent)) {
      const i = Number(last);
      if (/^(0|[1-9][0-9]*)$/.test(last) && i < parent.length) parent[i] = REDACTED;
    } else if (parent !== null && typeof parent === "object" && Object.hasOwn(parent, last)) {
      parent[last] = REDACTED;
    }
  }
  return copy;
}

function child(value: JsonValue | undefined, token: string): JsonValue | undefined {
  if (value === null || typeof value !== "object") return undefined;
  if (Array.isArray(value)) return /^(0|[1-9][0-9]*)$/.test(token) ? value[Number(token)] : undefined;
  return Object.hasOwn(value, token) ? value[token] : undefined;
}

/**
 * What an approver should be warned about before approving text they read on a screen: strings that are not
 * in Unicode NFC (the same-looking text in another form hashes differently) or that hold invisible or
 * direction-changing characters. Each warning names the argument's JSON pointer.
 */
export function argumentWarnings(args: JsonValue, pointer = ""): string[] {
  if (typeof args === "string") {
    const warnings: string[] = [];
    if (args.normalize("NFC") !== args) warnings.push(`${pointer || "/"} is not in Unicode NFC: it may look like other text`);
    if (INVISIBLE.test(args)) warnings.push(`${pointer || "/"} contains invisible or direction-changing characters`);
    return warnings;
  }
  if (args === null || typeof args !== "object") return [];
  const entries: [string, JsonValue][] = Array.isArray(args) ? args.map((v, i) => [String(i), v]) : Object.entries(args);
  return entries.flatMap(([key, value]) => argumentWarnings(value, `${pointer}/${key.replace(/~/g, "~0").replace(/\//g, "~1")}`)).slice(0, 32);
}
