/** Deepest nesting a request body may have (contracts admit arguments of depth 64, envelopes add a few levels). */
export const MAX_REQUEST_DEPTH = 128;

/**
 * Nesting depth of the arrays and objects in JSON `text`, counted without recursion (brackets inside strings
 * do not count); stops counting once it exceeds `limit`. Not a validator: malformed text is the parser's job.
 */
export function jsonDepth(text: string, limit = Infinity): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) {
        max = depth;
        if (max > limit) return max;
      }
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return max;
}

/**
 * Nesting depth of a parsed JSON value (a scalar is 0), walked with an explicit stack so that a value of any
 * depth is measured without recursion; stops once it exceeds `limit`. Run before code that recurses into it.
 */
export function valueDepth(value: unknown, limit = Infinity): number {
  let max = 0;
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!;
    if (typeof node !== "object" || node === null) continue;
    const here = depth + 1;
    if (here > max) {
      max = here;
      if (max > limit) return max;
    }
    for (const child of Array.isArray(node) ? node : Object.values(node)) if (typeof child === "object" && child !== null) stack.push([child, here]);
  }
  return max;
}
