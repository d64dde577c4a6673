/** A token with its position in the text it was read from (offsets are UTF-16 indices into that text). */
export interface TokenSpan {
  term: string;
  start: number;
  end: number;
}

// Small on purpose: words that carry no topic in English technical prose. Domain words ("official",
// "documentation", "api") stay searchable.
const STOP_WORDS: ReadonlySet<string> = new Set([
  "a",
  "an",
  "and",
  "are",
  "as",
  "at",
  "be",
  "but",
  "by",
  "can",
  "do",
  "does",
  "for",
  "from",
  "has",
  "have",
  "how",
  "i",
  "if",
  "in",
  "into",
  "is",
  "it",
  "its",
  "me",
  "my",
  "of",
  "on",
  "or",
  "our",
  "so",
  "such",
  "than",
  "that",
  "the",
  "their",
  "them",
  "then",
  "there",
  "these",
  "they",
  "this",
  "those",
  "to",
  "was",
  "we",
  "were",
  "what",
  "when",
  "where",
  "which",
  "who",
  "why",
  "will",
  "with",
  "you",
  "your",
]);

const WORD = /[\p{L}\p{N}]+/gu;

/** Search terms of `text` with their offsets: lowercased runs of letters and digits, stop words dropped. */
export function tokenSpans(text: string): TokenSpan[] {
  const spans: TokenSpan[] = [];
  for (const match of text.matchAll(WORD)) {
    const term = match[0].toLowerCase();
    if (STOP_WORDS.has(term)) continue;
    spans.push({ term, start: match.index, end: match.index + match[0].length });
  }
  return spans;
}

/** Search terms of `text`, in order, repeats kept. */
export function tokenize(text: string): string[] {
  return tokenSpans(text).map((span) => span.term);
}
