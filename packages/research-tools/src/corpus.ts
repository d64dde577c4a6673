import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Bm25Index } from "./bm25-index.js";
import { bestSnippet } from "./snippet.js";
import { collapseWhitespace, normalizeText } from "./text-normalization.js";
import { tokenize } from "./tokenize.js";

/** Where a document comes from: the vendor's own documentation, a community page, or a blog post. */
export type SourceType = "official" | "community" | "blog";

/** Every {@link SourceType}, in a stable order. */
export const SOURCE_TYPES: readonly SourceType[] = ["official", "community", "blog"];

/** Which sources a search considers: only official ones, or all of them. */
export type SourceFilter = "official" | "any";

/** Longest title and URL a corpus document may have; the tools' output schemas use the same bounds. */
export const MAX_TITLE_CHARS = 256;
export const MAX_URL_CHARS = 2048;

/** A document as written in the corpus: metadata plus its raw (markdown or HTML-ish) body. */
export interface CorpusEntry {
  url: string;
  title: string;
  sourceType: SourceType;
  /** Publication date, `YYYY-MM-DD`. */
  published: string;
  body: string;
}

/** A loaded document: its metadata and its normalized plain text. */
export interface CorpusDocument {
  readonly url: string;
  readonly title: string;
  readonly sourceType: SourceType;
  readonly published: string;
  readonly text: string;
}

/** What to search and how many hits to return at most. */
export interface SearchOptions {
  sourceType: SourceFilter;
  limit: number;
}

/** One ranked hit; `snippet` is plain text of about 200 characters around the best match. */
export interface SearchHit {
  url: string;
  title: string;
  sourceType: SourceType;
  snippet: string;
  score: number;
}

/** The corpus on disk is malformed (missing front matter, bad field, duplicate URL): a packaging error. */
export class CorpusError extends Error {
  readonly code = "INVALID_CORPUS";
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "CorpusError";
  }
}

/** The corpus shipped with this package, resolved from the built file (`dist/`) or the source (`src/`). */
export const DEFAULT_CORPUS_DIR = new URL("../corpus/", import.meta.url);

interface IndexedEntry {
  document: CorpusDocument;
  flatText: string;
}

/**
 * An immutable, in-memory document collection with BM25 search over title and body and lookup by URL.
 * The constructor throws {@link CorpusError} for an invalid entry.
 */
export class Corpus {
  readonly #entries: IndexedEntry[];
  readonly #byUrl = new Map<string, CorpusDocument>();
  readonly #index: Bm25Index;

  constructor(entries: readonly CorpusEntry[]) {
    this.#entries = entries.map((entry) => {
      const document = validEntry(entry);
      const key = urlKey(document.url);
      if (key === undefined) throw new CorpusError(`${document.url}: not an absolute URL`);
      if (this.#byUrl.has(key)) throw new CorpusError(`${document.url}: duplicate URL`);
      this.#byUrl.set(key, document);
      return { document, flatText: collapseWhitespace(document.text) };
    });
    this.#index = new Bm25Index(this.#entries.map(({ document }) => ({ title: tokenize(document.title), body: tokenize(document.text) })));
  }

  /** Every document, in load order. */
  get documents(): readonly CorpusDocument[] {
    return this.#entries.map((entry) => entry.document);
  }

  /** The document at `url` (the fragment is ignored, host and scheme case-insensitive), if any. */
  get(url: string): CorpusDocument | undefined {
    const key = urlKey(url);
    return key === undefined ? undefined : this.#byUrl.get(key);
  }

  /**
   * Up to `limit` documents with a positive score for `query`, best first, ties broken by URL. A query
   * without searchable terms (only stop words or punctuation) returns no hits.
   */
  search(query: string, options: SearchOptions): SearchHit[] {
    const terms = [...new Set(tokenize(query))];
    const limit = Math.max(0, Math.floor(options.limit));
    if (terms.length === 0 || limit === 0) return [];
    const scored: { entry: IndexedEntry; score: number }[] = [];
    this.#entries.forEach((entry, i) => {
      if (options.sourceType === "official" && entry.document.sourceType !== "official") return;
      const score = this.#index.score(i, terms);
      if (score > 0) scored.push({ entry, score });
    });
    scored.sort((a, b) => b.score - a.score || compareStrings(a.entry.document.url, b.entry.document.url));
    const weights = new Map(terms.map((term) => [term, this.#index.idf(term)] as const));
    return scored.slice(0, limit).map(({ entry, score }) => ({
      url: entry.document.url,
      title: entry.document.title,
      sourceType: entry.document.sourceType,
      snippet: bestSnippet(entry.flatText, weights),
      score,
    }));
  }
}

/**
 * Reads every `*.md` file of `dir` (front matter with url, title, source_type, published; then the body)
 * into a {@link Corpus}. Synchronous: the corpus is small and read once at start-up. Throws {@link CorpusError}.
 */
export function loadCorpus(dir: string | URL = DEFAULT_CORPUS_DIR): Corpus {
  const path = typeof dir === "string" ? dir : fileURLToPath(dir);
  let names: string[];
  try {
    names = readdirSync(path)
      .filter((name) => name.endsWith(".md"))
      .sort();
  } catch (error) {
    throw new CorpusError(`cannot read the corpus directory ${path}`, { cause: error });
  }
  return new Corpus(names.map((name) => parseCorpusFile(readFileSync(join(path, name), "utf8"), name)));
}

/** Parses one corpus file; `name` only labels errors. Throws {@link CorpusError}. */
export function parseCorpusFile(source: string, name: string): CorpusEntry {
  const match = /^---\r?\n([\s\S]*?)\r?\n---[ \t]*(?:\r?\n|$)([\s\S]*)$/.exec(source);
  if (match === null) throw new CorpusError(`${name}: expected a front matter block delimited by ---`);
  const fields = new Map<string, string>();
  for (const line of (match[1] ?? "").split(/\r?\n/)) {
    if (line.trim() === "") continue;
    const colon = line.indexOf(":");
    if (colon <= 0) throw new CorpusError(`${name}: front matter line without "key: value"`);
    fields.set(line.slice(0, colon).trim(), line.slice(colon + 1).trim());
  }
  const field = (key: string): string => {
    const value = fields.get(key);
    if (value === undefined || value === "") throw new CorpusError(`${name}: front matter lacks ${key}`);
    return value;
  };
  const sourceType = field("source_type");
  if (!isSourceType(sourceType)) throw new CorpusError(`${name}: source_type must be one of ${SOURCE_TYPES.join(", ")}`);
  return { url: field("url"), title: field("title"), sourceType, published: field("published"), body: match[2] ?? "" };
}

function validEntry(entry: CorpusEntry): CorpusDocument {
  const label = entry.url.slice(0, 120);
  if (entry.url.length > MAX_URL_CHARS) throw new CorpusError(`${label}: URL longer than ${MAX_URL_CHARS} characters`);
  if (entry.title.length === 0 || entry.title.length > MAX_TITLE_CHARS || /[\r\n]/.test(entry.title)) {
    throw new CorpusError(`${label}: title must be one line of 1-${MAX_TITLE_CHARS} characters`);
  }
  if (!isSourceType(entry.sourceType)) throw new CorpusError(`${label}: unknown source type`);
  if (!/^\d{4}-\d{2}-\d{2}$/.test(entry.published)) throw new CorpusError(`${label}: published must be YYYY-MM-DD`);
  const text = normalizeText(entry.body);
  if (text === "") throw new CorpusError(`${label}: empty body`);
  return { url: entry.url, title: entry.title, sourceType: entry.sourceType, published: entry.published, text };
}

function isSourceType(value: string): value is SourceType {
  return (SOURCE_TYPES as readonly string[]).includes(value);
}

// WHATWG parsing lowercases scheme and host and normalizes the path; the fragment never selects a document.
function urlKey(url: string): string | undefined {
  if (!URL.canParse(url)) return undefined;
  const parsed = new URL(url);
  parsed.hash = "";
  return parsed.href;
}

// Code-unit order, not locale order: ranking must not depend on the machine's locale.
function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
