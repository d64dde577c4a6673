/**
 * Nesting depth of a JSON text, measured by one linear scan that skips string contents. Run before
 * `JSON.parse` so that a deeply nested payload is refused without building it.
 */
export function jsonDepth(text: string): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c /* \ */) i++;
      else if (c === 0x22 /* " */) inString = false;
      continue;
    }
    if (c === 0x22) inString = true;
    else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      depth++;
      if (depth > max) max = depth;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) depth--;
  }
  return max;
}

/** UTF-8 byte length of a string without allocating a buffer. */
export function utf8Length(text: string): number {
  return Buffer.byteLength(text, "utf8");
}
