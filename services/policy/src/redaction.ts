import type { JsonValue } from "@toolgate/contracts";
import { pointerOf } from "@toolgate/registry";

/** Characters a human cannot see or that reorder text on screen: zero-width, bidirectional controls, BOM. */
const INVISIBLE = /[\u00AD\u180E\u200B-\u200F\u202A-\u202E\u2060-\u2064\u2066-\u2069\uFEFF]/u;

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
  return entries.flatMap(([key, value]) => argumentWarnings(value, `${pointer}${pointerOf([key])}`)).slice(0, 32);
}
