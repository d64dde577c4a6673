import { createHash } from "node:crypto";
import type { ProviderName } from "./types.js";

/**
 * The tool names each provider accepts. OpenAI (Chat Completions and Responses) and Anthropic take
 * `^[a-zA-Z0-9_-]{1,64}$`; Gemini's function declarations must start with a letter or an underscore and may
 * hold letters, digits, `_`, `.`, `:` and `-`, at most 64 characters (the Vertex and Gemini API references
 * differ on dots, colons and 64 or 128: the narrower reading is kept); MCP (SEP-986) allows letters, digits,
 * `_`, `-` and `.`, 1 to 128 characters.
 */
export const PROVIDER_NAME_RULES: Readonly<Record<ProviderName, RegExp>> = {
  "openai-responses": /^[a-zA-Z0-9_-]{1,64}$/,
  "openai-chat": /^[a-zA-Z0-9_-]{1,64}$/,
  anthropic: /^[a-zA-Z0-9_-]{1,64}$/,
  gemini: /^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$/,
  mcp: /^[a-zA-Z0-9_.-]{1,128}$/,
};

/** Whether `provider` accepts `name` as a tool name. */
export function providerAcceptsName(provider: ProviderName, name: string): boolean {
  return PROVIDER_NAME_RULES[provider].test(name);
}

/** Longest safe name: within every provider's limit and the contract's own (`^[a-z][a-z0-9_]{0,63}$`). */
export const MAX_SAFE_NAME_LENGTH = 64;
/** The contract linter wants at least three characters. */
const MIN_SAFE_NAME_LENGTH = 3;
/**
 * Suffixes are written in consonants: the linter reads digit runs in a name as a version or a date, and a
 * suffix without vowels never spells a word it flags (`new`, `tmp`…). 20⁷ ≈ 1.3·10⁹ values.
 */
const SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz";
const SUFFIX_LENGTH = 7;

/** A name every provider accepts, that NATS subjects carry as one token, and that the contract schema takes. */
export function isSafeToolName(name: string): boolean {
  return name.length >= MIN_SAFE_NAME_LENGTH && name.length <= MAX_SAFE_NAME_LENGTH && /^[a-z][a-z0-9]*(_[a-z0-9]+)*$/.test(name);
}

/** A short suffix derived from the original name only, so the same original always gets the same one. */
export function nameSuffix(original: string): string {
  const digest = createHash("sha256").update(original, "utf8").digest();
  let out = "";
  for (let i = 0; i < SUFFIX_LENGTH; i++) out += SUFFIX_ALPHABET[digest[i]! % SUFFIX_ALPHABET.length];
  return out;
}

/**
 * The snake_case form of a tool name: camel case split at its humps (`GetWeather` → `get_weather`,
 * `HTTPRequest` → `http_request`), accents dropped, every run of other characters (`.`, spaces, `>`, `*`, `-`)
 * one `_`. A name that starts with a digit, or keeps fewer than three characters, is prefixed with `tool_`.
 * Not yet bounded in length: see {@link safeToolNames}.
 */
export function snakeToolName(original: string): string {
  const words = original
    .normalize("NFKD")
    .replace(/\p{M}/gu, "")
    .replace(/([a-z0-9])([A-Z])/g, "$1_$2")
    .replace(/([A-Z]+)([A-Z][a-z])/g, "$1_$2")
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "_")
    .replace(/^_+|_+$/g, "");
  return /^[a-z]/.test(words) && words.length >= MIN_SAFE_NAME_LENGTH ? words : words === "" ? "tool" : `tool_${words}`;
}

/** Whether nothing of the original survives in its snake_case form (a name in another script, only symbols). */
function nothingSurvives(original: string): boolean {
  return !/[a-z0-9]/i.test(original.normalize("NFKD").replace(/\p{M}/gu, ""));
}

function withSuffix(base: string, original: string): string {
  const room = MAX_SAFE_NAME_LENGTH - SUFFIX_LENGTH - 1;
  const head = base.slice(0, room).replace(/_+$/, "");
  return `${head}_${nameSuffix(original)}`;
}

/**
 * Safe names for a set of original tool names, deterministic in the set (not in its order): a name that is
 * already safe keeps it; any other gets its snake_case form, with a suffix derived from the original when the
 * form is too long or is also the form of another name in the set (or one of `taken`). Two originals never
 * share a safe name; an original given twice is the caller's to refuse.
 */
export function safeToolNames(originals: readonly string[], taken: ReadonlySet<string> = new Set()): Map<string, string> {
  const unique = [...new Set(originals)];
  const bases = new Map(unique.map((original) => [original, isSafeToolName(original) ? original : snakeToolName(original)]));
  const claims = new Map<string, number>();
  for (const base of bases.values()) claims.set(base, (claims.get(base) ?? 0) + 1);
  const names = new Map<string, string>();
  for (const [original, base] of bases) {
    const keepsItsOwn = isSafeToolName(original);
    const collides = (claims.get(base) ?? 0) > 1 || taken.has(base);
    const tooLong = base.length > MAX_SAFE_NAME_LENGTH;
    const plain = (keepsItsOwn && !taken.has(base)) || (!collides && !tooLong && !nothingSurvives(original));
    names.set(original, plain ? base : withSuffix(base, original));
  }
  // A suffix that meets another name (one chance in ~10⁹) is drawn again, from the original and a counter.
  const used = new Set<string>(taken);
  for (const [original, name] of names) {
    let candidate = name;
    for (let n = 1; used.has(candidate); n++) candidate = withSuffix(bases.get(original)!, `${original}\u0000${n}`);
    used.add(candidate);
    names.set(original, candidate);
  }
  return names;
}
