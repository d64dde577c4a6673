/**
 * Tool poisoning: text in a definition that a model reads as an instruction. A definition from outside (a
 * provider's tool list, an MCP server's `tools/list`) is untrusted input; these rules find instruction-like
 * text, invisible or bidirectional Unicode, and references to credentials or local files anywhere in it.
 */

/** The poisoning rules, each reported by the linter with severity `error`. */
export const POISON_RULES = {
  "poison-instruction": "the text reads as an instruction to the model (ignore previous instructions, do not tell the user, <IMPORTANT>…)",
  "poison-hidden-unicode": "the text carries invisible characters (zero-width, word joiner, BOM, Unicode tags, other format characters)",
  "poison-bidi-control": "the text carries bidirectional control characters, which make it read differently from how it is stored",
  "poison-credential-reference":
    "the text refers to credentials or local secret files (~/.ssh, id_rsa, .env, /etc/passwd, cloud credentials, API keys, tokens)",
} as const;

export type PoisonRule = keyof typeof POISON_RULES;

/** One poisoning finding: the rule, where it is (a JSON pointer into the linted document) and what was found. */
export interface PoisonFinding {
  rule: PoisonRule;
  pointer: string;
  message: string;
}

/** Where a string sits: prose a model reads, or a structural value (a type, a pattern, a property name). */
type Position = "text" | "structural";

/** Schema keywords whose string values, and everything below them, are prose or data shown to a model. */
const TEXT_KEYWORDS = new Set(["description", "title", "$comment", "enum", "const", "default", "examples", "deprecationMessage"]);

const BIDI = new Set([0x061c, 0x200e, 0x200f, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069]);
const NAMED: Readonly<Record<number, string>> = {
  0x00ad: "SOFT HYPHEN",
  0x061c: "ARABIC LETTER MARK",
  0x180e: "MONGOLIAN VOWEL SEPARATOR",
  0x200b: "ZERO WIDTH SPACE",
  0x200c: "ZERO WIDTH NON-JOINER",
  0x200d: "ZERO WIDTH JOINER",
  0x200e: "LEFT-TO-RIGHT MARK",
  0x200f: "RIGHT-TO-LEFT MARK",
  0x202a: "LEFT-TO-RIGHT EMBEDDING",
  0x202b: "RIGHT-TO-LEFT EMBEDDING",
  0x202c: "POP DIRECTIONAL FORMATTING",
  0x202d: "LEFT-TO-RIGHT OVERRIDE",
  0x202e: "RIGHT-TO-LEFT OVERRIDE",
  0x2060: "WORD JOINER",
  0x2061: "FUNCTION APPLICATION",
  0x2062: "INVISIBLE TIMES",
  0x2063: "INVISIBLE SEPARATOR",
  0x2064: "INVISIBLE PLUS",
  0x2066: "LEFT-TO-RIGHT ISOLATE",
  0x2067: "RIGHT-TO-LEFT ISOLATE",
  0x2068: "FIRST STRONG ISOLATE",
  0x2069: "POP DIRECTIONAL ISOLATE",
  0xfeff: "ZERO WIDTH NO-BREAK SPACE (BOM)",
};
const FORMAT_CHARACTER = /\p{Cf}/u;

/** Invisible characters that are not format characters but render as nothing (fillers, variation selectors used for smuggling). */
function invisibleNonFormat(cp: number): boolean {
  return cp === 0x115f || cp === 0x1160 || cp === 0x3164 || cp === 0xffa0 || (cp >= 0xe0100 && cp <= 0xe01ef);
}

function isTag(cp: number): boolean {
  return cp >= 0xe0000 && cp <= 0xe007f;
}

function nameOf(cp: number): string {
  const hex = `U+${cp.toString(16).toUpperCase().padStart(4, "0")}`;
  if (isTag(cp)) return `${hex} TAG CHARACTER`;
  const name = NAMED[cp];
  return name === undefined ? `${hex} (invisible)` : `${hex} ${name}`;
}

const INSTRUCTION_PATTERNS: readonly RegExp[] = [
  /\b(ignore|disregard|forget|override|bypass|skip)\b[^.\n]{0,40}?\b(previous|prior|above|earlier|preceding|all|any|other|system|original|your)\b[^.\n]{0,24}?\b(instructions?|prompts?|rules|directions|directives|guidelines|messages|context|guardrails)\b/i,
  /\bbefore (using|calling|invoking|running|executing) (this|the|any)( \w+){0,2} tools?\b[^.\n]{0,60}?\b(read|open|cat|load|send|include|pass|attach|upload|copy|print|access|provide|forward|fetch)\b/i,
  /\b(do not|don't|dont|never|must not|should not)\s+(tell|inform|mention|reveal|disclose|show|notify|alert|warn|let)\b[^.\n]{0,30}?\b(user|human|operator|anyone|them)\b/i,
  /\bwithout (telling|informing|notifying|alerting|asking|warning|mentioning)\b[^.\n]{0,20}?\b(user|human|operator)\b/i,
  /\b(keep|is) (this|it) (a )?(secret|hidden|confidential)\b/i,
  /<\s*\/?\s*(important|system|instructions?|admin|override|secret|hidden|critical)\s*>/i,
  /\[\s*\/?\s*(INST|SYSTEM|SYS)\s*\]|<<\s*SYS\s*>>|<\|\s*(im_start|im_end|system|endoftext)\s*\|>/i,
  /\byou (are|must|should|will) now\b/i,
  /\b(new|updated|real|true|hidden|secret) (system )?instructions?\b/i,
  /\bsystem prompt\b/i,
  /\b(always|must|first) (also )?(call|use|invoke|run) this tool (first|before|instead)\b/i,
  /\b(send|forward|upload|post|exfiltrate|transmit|leak|copy|email)(s|es|ed|ing)?\b[^.\n]{0,60}?\b(to|at)\s+(https?:\/\/|[\w.+-]+@[\w-]+\.)/i,
  /(忽略|无视|忘记)[^。\n]{0,10}(之前|以上|先前|前面|所有)[^。\n]{0,6}(指令|指示|提示|规则)/,
  /(不要|别|切勿)(告诉|通知|提醒)[^。\n]{0,6}用户/,
];

const CREDENTIAL_PATTERNS: readonly RegExp[] = [
  /~[\\/]\.[\w.-]+/,
  /(\$HOME|\$\{HOME\}|%USERPROFILE%|%APPDATA%)[\\/]/i,
  /(^|[^\w.])\.ssh\b/i,
  /\bid_(rsa|dsa|ecdsa|ed25519)\b/i,
  /\b(authorized_keys|known_hosts)\b/i,
  /(^|[\s'"`(/\\=:,])\.env(\.[\w-]+)?(?![\w-])/i,
  /\/etc\/(passwd|shadow|sudoers|gshadow|ssh)\b/i,
  /\.aws[\\/](credentials|config)\b/i,
  /\baws_(secret_access_key|access_key_id|session_token)\b/i,
  /\bapplication_default_credentials\.json\b/i,
  /\.config[\\/]gcloud\b|\bgcloud[\\/]credentials\b|\bgoogle_application_credentials\b/i,
  /\.kube[\\/]config\b|\.docker[\\/]config\.json\b/i,
  /(^|[^\w])\.(npmrc|netrc|pgpass|git-credentials|pypirc)\b/i,
  /\.cursor[\\/]|\bmcp\.json\b|\bclaude_desktop_config\.json\b/i,
  /\b(api|secret|private|access|signing|encryption)[\s_-]?keys?\b/i,
  /\b(access|auth|bearer|refresh|session|oauth|id|github|gitlab|slack|personal[\s_-]access|csrf)[\s_-]?tokens?\b/i,
  /\b(your|user'?s|their|my)\s+(\w+\s+)?tokens?\b/i,
  /\b(passwords?|passphrases?|passwd)\b/i,
  /\b(credentials?|secrets)\b/i,
  /\b(seed phrase|mnemonic phrase|wallet key)\b/i,
];

/** Keywords whose members are names (of properties, definitions), not keywords. */
const NAME_MAPS = new Set(["properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependentRequired"]);

/**
 * Every poisoning finding in a tool definition (a contract document): its description and both schemas,
 * walked whole (property descriptions, titles, enum values, defaults, examples; property names and every other
 * string for invisible characters). Pointers are into `contract`. Never throws.
 */
export function poisonFindings(contract: unknown): PoisonFinding[] {
  const findings: PoisonFinding[] = [];
  visit(contract, "", "structural", undefined, 0, findings);
  return findings;
}

/** Prose a model reads: the contract's description, and anything under a text keyword of its schemas. */
function positionOf(pointer: string, key: string, parent: Position, parentKey: string | undefined): Position {
  if (parent === "text") return "text";
  if (pointer === "/description") return "text";
  const inSchema = pointer.startsWith("/input_schema/") || pointer.startsWith("/output_schema/");
  return inSchema && !(parentKey !== undefined && NAME_MAPS.has(parentKey)) && TEXT_KEYWORDS.has(key) ? "text" : "structural";
}

function visit(value: unknown, pointer: string, position: Position, ownKey: string | undefined, depth: number, findings: PoisonFinding[]): void {
  if (depth > 64 || findings.length >= 100) return;
  if (typeof value === "string") {
    checkString(value, pointer, position, findings);
    return;
  }
  if (Array.isArray(value)) {
    value.forEach((item, i) => visit(item, `${pointer}/${i}`, position, undefined, depth + 1, findings));
    return;
  }
  if (typeof value !== "object" || value === null) return;
  for (const [key, child] of Object.entries(value)) {
    const at = `${pointer}/${key.replace(/~/g, "~0").replace(/\//g, "~1")}`;
    // A key (a property name) is checked for invisible characters only: names like `api_key` are legitimate.
    checkUnicode(key, at, "property name", findings);
    visit(child, at, positionOf(at, key, position, ownKey), key, depth + 1, findings);
  }
}

function checkString(text: string, pointer: string, position: Position, findings: PoisonFinding[]): void {
  checkUnicode(text, pointer, "text", findings);
  if (position !== "text") return;
  // Matched on what a model would read: invisible characters removed, compatibility forms folded (fullwidth letters).
  const visible = stripInvisible(text).normalize("NFKC").replace(/\s+/g, " ");
  const hidden = decodeTags(text);
  for (const [rule, patterns] of [
    ["poison-instruction", INSTRUCTION_PATTERNS],
    ["poison-credential-reference", CREDENTIAL_PATTERNS],
  ] as const) {
    for (const candidate of hidden === "" ? [visible] : [visible, hidden]) {
      const match = patterns.map((re) => re.exec(candidate)).find((m) => m !== null);
      if (match) {
        const where = candidate === hidden ? " (spelled in invisible tag characters)" : "";
        findings.push({ rule, pointer, message: `${POISON_RULES[rule]}: found ${JSON.stringify(match[0].trim().slice(0, 80))}${where}` });
        break;
      }
    }
  }
}

function checkUnicode(text: string, pointer: string, what: string, findings: PoisonFinding[]): void {
  const hidden = new Map<number, number>();
  const bidi = new Map<number, number>();
  let first = -1;
  let firstBidi = -1;
  let index = 0;
  for (const char of text) {
    const cp = char.codePointAt(0)!;
    if (BIDI.has(cp)) {
      bidi.set(cp, (bidi.get(cp) ?? 0) + 1);
      if (firstBidi < 0) firstBidi = index;
    } else if (isTag(cp) || invisibleNonFormat(cp) || FORMAT_CHARACTER.test(char)) {
      hidden.set(cp, (hidden.get(cp) ?? 0) + 1);
      if (first < 0) first = index;
    }
    index++;
  }
  const describe = (found: Map<number, number>) =>
    [...found]
      .slice(0, 6)
      .map(([cp, n]) => `${nameOf(cp)}${n > 1 ? ` ×${n}` : ""}`)
      .join(", ");
  if (hidden.size > 0) {
    const tags = decodeTags(text);
    const spelled = tags === "" ? "" : `; the tag characters spell ${JSON.stringify(tags.slice(0, 80))}`;
    findings.push({
      rule: "poison-hidden-unicode",
      pointer,
      message: `${what} carries invisible characters: ${describe(hidden)} (first at character ${first})${spelled}`,
    });
  }
  if (bidi.size > 0) {
    findings.push({
      rule: "poison-bidi-control",
      pointer,
      message: `${what} carries bidirectional controls: ${describe(bidi)} (first at character ${firstBidi})`,
    });
  }
}

function stripInvisible(text: string): string {
  let out = "";
  for (const char of text) {
    const cp = char.codePointAt(0)!;
    if (BIDI.has(cp) || isTag(cp) || invisibleNonFormat(cp) || FORMAT_CHARACTER.test(char)) continue;
    out += char;
  }
  return out;
}

/** The ASCII text hidden in Unicode tag characters (U+E0020–U+E007E map to U+0020–U+007E); empty when there is none. */
function decodeTags(text: string): string {
  let out = "";
  for (const char of text) {
    const cp = char.codePointAt(0)!;
    if (cp >= 0xe0020 && cp <= 0xe007e) out += String.fromCodePoint(cp - 0xe0000);
  }
  return out;
}
