import { tokenSpans } from "./tokenize.js";

/** Target length of a search snippet; an ellipsis may be added at either end. */
export const SNIPPET_CHARS = 200;

/**
 * The window of `text` (one line, whitespace collapsed) of about `width` characters that covers the most
 * query weight: each distinct term counts once with its weight. Falls back to the opening of the text when
 * no term occurs; ties go to the earliest window. Marks cut ends with "…".
 */
export function bestSnippet(text: string, weights: ReadonlyMap<string, number>, width: number = SNIPPET_CHARS): string {
  const spans = tokenSpans(text);
  let bestStart = 0;
  let bestScore = 0;
  for (let i = 0; i < spans.length; i++) {
    const first = spans[i];
    if (first === undefined || !weights.has(first.term)) continue;
    const seen = new Set<string>();
    let score = 0;
    for (let j = i; j < spans.length; j++) {
      const span = spans[j];
      if (span === undefined || span.end - first.start > width) break;
      const weight = weights.get(span.term);
      if (weight === undefined || seen.has(span.term)) continue;
      seen.add(span.term);
      score += weight;
    }
    if (score > bestScore) {
      bestScore = score;
      bestStart = first.start;
    }
  }
  return cutWindow(text, bestStart, width);
}

function cutWindow(text: string, start: number, width: number): string {
  let end = Math.min(text.length, start + width);
  if (end < text.length) {
    // End on a word boundary unless that would throw away more than half the window.
    const space = text.lastIndexOf(" ", end);
    if (space > start + width / 2) end = space;
  }
  const last = text.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end -= 1;
  const body = text.slice(start, end).trim();
  return `${start > 0 ? "…" : ""}${body}${end < text.length ? "…" : ""}`;
}
