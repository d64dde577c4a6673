/** Characters `fetch_document` returns unless configured lower; also the bound of its output schema. */
export const DEFAULT_FETCH_MAX_CHARS = 20_000;

// A Map, not an object literal: names such as "constructor" must not resolve through the prototype.
const NAMED_ENTITIES: ReadonlyMap<string, string> = new Map(
  Object.entries({
    amp: "&",
    lt: "<",
    gt: ">",
    quot: '"',
    apos: "'",
    nbsp: " ",
    shy: "",
    mdash: "\u2014",
    ndash: "\u2013",
    hellip: "\u2026",
    middot: "\u00b7",
    bull: "\u2022",
    lsquo: "\u2018",
    rsquo: "\u2019",
    ldquo: "\u201c",
    rdquo: "\u201d",
    laquo: "\u00ab",
    raquo: "\u00bb",
    copy: "\u00a9",
    reg: "\u00ae",
    trade: "\u2122",
    deg: "\u00b0",
    times: "\u00d7",
    euro: "\u20ac",
  }),
);

// Elements whose content is never prose (code, metadata, site navigation): dropped with everything inside them.
const NON_TEXT_ELEMENTS = /<(script|style|noscript|template|head|nav)\b[^>]*>[\s\S]*?<\/\1\s*>/gi;
const PARAGRAPH_TAGS =
  /<\/?(?:p|div|section|article|header|footer|main|aside|h[1-6]|ul|ol|table|thead|tbody|blockquote|pre|figure|figcaption|dl|hr|html|body)\b[^>]*>/gi;
// Opening tags only: "</li><li>" must yield one line break, not a blank line.
const LINE_TAGS = /<(?:br|li|tr|dt|dd)\b[^>]*>/gi;
// Only `<` followed by a letter, `/` or `!` opens a tag, so prose such as "a < b" survives.
const ANY_TAG = /<(?:\/?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?\/?|![A-Za-z][^<>]*)>/g;
const ENTITY = /&(#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,15});/g;
// Control characters other than tab and newline: invisible in text and expensive once JSON-escaped.
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL_CHARS = /[\u0000-\u0008\u000B-\u001F\u007F]/g;

/**
 * Plain text of a markdown or HTML-ish body: scripts, styles, comments and tags removed, light markdown
 * syntax (headings, fences, bold, backticks, links) unwrapped, entities decoded, whitespace collapsed
 * within lines, and blank-line runs reduced to a single paragraph break.
 */
export function normalizeText(raw: string): string {
  let text = raw.replace(/\r\n?/g, "\n");
  text = text.replace(/<!--[\s\S]*?-->/g, "");
  text = text.replace(NON_TEXT_ELEMENTS, "");
  text = text.replace(PARAGRAPH_TAGS, "\n\n");
  text = text.replace(LINE_TAGS, "\n");
  text = text.replace(ANY_TAG, "");
  text = stripMarkdown(text);
  // Entities are decoded last so that an escaped "&lt;tag&gt;" ends up as literal text, not as markup.
  text = text.replace(ENTITY, decodeEntity);
  text = text.replace(CONTROL_CHARS, "");
  const lines = text.split("\n").map((line) => line.replace(/\s+/g, " ").trim());
  return lines
    .join("\n")
    .replace(/\n{3,}/g, "\n\n")
    .trim();
}

/** The first `maxChars` UTF-16 units of `text` (never splitting a surrogate pair) and whether anything was cut. */
export function truncateText(text: string, maxChars: number = DEFAULT_FETCH_MAX_CHARS): { text: string; truncated: boolean } {
  if (text.length <= maxChars) return { text, truncated: false };
  let end = Math.max(0, Math.floor(maxChars));
  const last = text.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end -= 1;
  return { text: text.slice(0, end).trimEnd(), truncated: true };
}

/** Text on one line: every whitespace run, paragraph breaks included, becomes a single space. */
export function collapseWhitespace(text: string): string {
  return text.replace(/\s+/g, " ").trim();
}

function stripMarkdown(text: string): string {
  return text
    .replace(/^[ \t]*(?:```|~~~).*$/gm, "")
    .replace(/^[ \t]{0,3}#{1,6}[ \t]+/gm, "")
    .replace(/^[ \t]*>[ \t]?/gm, "")
    .replace(/!?\[([^\]\n]*)\]\([^)\s]*\)/g, "$1")
    .replace(/\*\*/g, "")
    .replace(/`/g, "");
}

function decodeEntity(whole: string, body: string): string {
  if (body.startsWith("#")) {
    const hex = body[1] === "x" || body[1] === "X";
    const codePoint = Number.parseInt(body.slice(hex ? 2 : 1), hex ? 16 : 10);
    const valid = codePoint > 0 && codePoint <= 0x10ffff && (codePoint < 0xd800 || codePoint > 0xdfff);
    return valid ? String.fromCodePoint(codePoint) : "\uFFFD";
  }
  return NAMED_ENTITIES.get(body) ?? whole;
}
