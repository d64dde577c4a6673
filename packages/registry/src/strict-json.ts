import type { JsonValue } from "@toolgate/contracts";

/** Bounds checked while parsing, so an oversized value is refused before the rest of the text is built. */
export interface StrictJsonLimits {
  /** Deepest nesting of objects and arrays; `{}` is depth 1. */
  maxDepth: number;
  /** Longest string value in Unicode code points (the unit of JSON Schema's `maxLength`); keys are not counted. */
  maxStringLength?: number;
  /** Most items in one array. */
  maxArrayItems?: number;
}

/**
 * Why a text was refused. `INVALID_JSON` covers everything that is not I-JSON (RFC 7493): syntax errors,
 * duplicate keys, lone surrogates, numbers a double cannot hold. `INVALID_ARGUMENTS` is a limit that was exceeded.
 */
export interface StrictJsonError {
  code: "INVALID_JSON" | "INVALID_ARGUMENTS";
  message: string;
  /** RFC 6901 pointer to the value being parsed when the problem was found. */
  pointer: string;
  keyword: "syntax" | "duplicateKey" | "loneSurrogate" | "numberRange" | "maxDepth" | "maxLength" | "maxItems";
}

export type StrictJsonResult = { ok: true; value: JsonValue } | { ok: false; error: StrictJsonError };

/**
 * Parses an I-JSON text (RFC 7493): RFC 8259 syntax, plus no duplicate keys, no lone UTF-16 surrogates, no
 * integer literal beyond ±(2^53−1) and no number that overflows a double. Objects are ordinary objects whose
 * `__proto__` key, if any, is an own property (as with `JSON.parse`), so no key can reach a prototype.
 * Never throws on any input.
 */
export function parseStrictJson(text: string, limits: StrictJsonLimits): StrictJsonResult {
  const parser = new StrictJsonParser(text, limits);
  try {
    parser.skipWhitespace();
    const value = parser.value(0);
    parser.skipWhitespace();
    if (parser.pos < text.length) parser.fail("INVALID_JSON", "syntax", `unexpected ${parser.describe()} after the JSON value`);
    return { ok: true, value };
  } catch (error) {
    if (error instanceof StrictJsonFailure) return { ok: false, error: error.detail };
    throw error;
  }
}

/** First character of a JSON text after leading whitespace, or undefined for a blank text. */
export function firstSignificantChar(text: string): string | undefined {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) return text[i];
  }
  return undefined;
}

class StrictJsonFailure {
  constructor(readonly detail: StrictJsonError) {}
}

const ESCAPES: Record<number, string> = { 0x22: '"', 0x5c: "\\", 0x2f: "/", 0x62: "\b", 0x66: "\f", 0x6e: "\n", 0x72: "\r", 0x74: "\t" };

class StrictJsonParser {
  pos = 0;
  readonly #text: string;
  readonly #maxDepth: number;
  readonly #maxString: number;
  readonly #maxItems: number;
  /** Keys and indices from the root to the value being parsed, for error pointers. */
  readonly #path: (string | number)[] = [];

  constructor(text: string, limits: StrictJsonLimits) {
    this.#text = text;
    this.#maxDepth = limits.maxDepth;
    this.#maxString = limits.maxStringLength ?? Infinity;
    this.#maxItems = limits.maxArrayItems ?? Infinity;
  }

  fail(code: StrictJsonError["code"], keyword: StrictJsonError["keyword"], message: string): never {
    const pointer = this.#path.map((t) => `/${String(t).replace(/~/g, "~0").replace(/\//g, "~1")}`).join("");
    // A plain object, caught in parseStrictJson: capturing a stack for every refused argument would cost more than the parse.
    // eslint-disable-next-line @typescript-eslint/only-throw-error
    throw new StrictJsonFailure({ code, keyword, pointer, message });
  }

  describe(): string {
    if (this.pos >= this.#text.length) return "end of input";
    return `character ${JSON.stringify(this.#text[this.pos])} at position ${this.pos}`;
  }

  skipWhitespace(): void {
    const text = this.#text;
    let pos = this.pos;
    for (;;) {
      const c = text.charCodeAt(pos);
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) pos++;
      else break;
    }
    this.pos = pos;
  }

  value(depth: number): JsonValue {
    const c = this.#text.charCodeAt(this.pos);
    switch (c) {
      case 0x7b /* { */:
        return this.#object(depth + 1);
      case 0x5b /* [ */:
        return this.#array(depth + 1);
      case 0x22 /* " */: {
        const s = this.#string();
        if (s.codePoints > this.#maxString) {
          this.fail(
            "INVALID_ARGUMENTS",
            "maxLength",
            `a string has ${s.codePoints} characters; no string in these arguments may have more than ${this.#maxString}`,
          );
        }
        return s.value;
      }
      case 0x74 /* t */:
        return this.#literal("true", true);
      case 0x66 /* f */:
        return this.#literal("false", false);
      case 0x6e /* n */:
        return this.#literal("null", null);
      default:
        if (c === 0x2d || (c >= 0x30 && c <= 0x39)) return this.#number();
        return this.fail("INVALID_JSON", "syntax", `unexpected ${this.describe()}`);
    }
  }

  #enter(depth: number): void {
    if (depth > this.#maxDepth) this.fail("INVALID_ARGUMENTS", "maxDepth", `arguments nest more than ${this.#maxDepth} levels`);
  }

  #object(depth: number): Record<string, JsonValue> {
    this.#enter(depth);
    const text = this.#text;
    const result: Record<string, JsonValue> = {};
    this.pos++;
    this.skipWhitespace();
    if (text.charCodeAt(this.pos) === 0x7d /* } */) {
      this.pos++;
      return result;
    }
    for (;;) {
      if (text.charCodeAt(this.pos) !== 0x22) this.fail("INVALID_JSON", "syntax", `expected a property name, found ${this.describe()}`);
      const key = this.#string().value;
      this.#path.push(key);
      if (Object.prototype.hasOwnProperty.call(result, key)) {
        this.fail("INVALID_JSON", "duplicateKey", `the key ${JSON.stringify(key.slice(0, 64))} appears twice in one object`);
      }
      this.skipWhitespace();
      if (text.charCodeAt(this.pos) !== 0x3a /* : */) this.fail("INVALID_JSON", "syntax", `expected ":" after a property name, found ${this.describe()}`);
      this.pos++;
      this.skipWhitespace();
      const value = this.value(depth);
      // An assignment to "__proto__" would replace the prototype; define it as an own property, as JSON.parse does.
      if (key === "__proto__") Object.defineProperty(result, key, { value, enumerable: true, writable: true, configurable: true });
      else result[key] = value;
      this.#path.pop();
      this.skipWhitespace();
      const c = text.charCodeAt(this.pos);
      if (c === 0x2c /* , */) {
        this.pos++;
        this.skipWhitespace();
      } else if (c === 0x7d) {
        this.pos++;
        return result;
      } else this.fail("INVALID_JSON", "syntax", `expected "," or "}" in an object, found ${this.describe()}`);
    }
  }

  #array(depth: number): JsonValue[] {
    this.#enter(depth);
    const text = this.#text;
    const result: JsonValue[] = [];
    this.pos++;
    this.skipWhitespace();
    if (text.charCodeAt(this.pos) === 0x5d /* ] */) {
      this.pos++;
      return result;
    }
    for (;;) {
      if (result.length >= this.#maxItems) {
        this.fail("INVALID_ARGUMENTS", "maxItems", `an array has more than ${this.#maxItems} items; no array in these arguments may have more`);
      }
      this.#path.push(result.length);
      result.push(this.value(depth));
      this.#path.pop();
      this.skipWhitespace();
      const c = text.charCodeAt(this.pos);
      if (c === 0x2c) {
        this.pos++;
        this.skipWhitespace();
      } else if (c === 0x5d) {
        this.pos++;
        return result;
      } else this.fail("INVALID_JSON", "syntax", `expected "," or "]" in an array, found ${this.describe()}`);
    }
  }

  /** A string starting at the opening quote; checks escapes, control characters and surrogate pairing. */
  #string(): { value: string; codePoints: number } {
    const text = this.#text;
    const length = text.length;
    let pos = this.pos + 1;
    let start = pos;
    let out = "";
    let units = 0;
    let pairs = 0;
    let pendingHigh = false;
    for (;;) {
      if (pos >= length) {
        this.pos = pos;
        this.fail("INVALID_JSON", "syntax", "unterminated string");
      }
      let c = text.charCodeAt(pos);
      if (c === 0x22) {
        out += text.slice(start, pos);
        pos++;
        break;
      }
      if (c === 0x5c /* \ */) {
        out += text.slice(start, pos);
        const e = text.charCodeAt(pos + 1);
        if (e === 0x75 /* u */) {
          const hex = text.slice(pos + 2, pos + 6);
          if (!/^[0-9a-fA-F]{4}$/.test(hex)) {
            this.pos = pos;
            this.fail("INVALID_JSON", "syntax", `invalid \\u escape at position ${pos}`);
          }
          c = parseInt(hex, 16);
          out += String.fromCharCode(c);
          pos += 6;
        } else {
          const decoded = ESCAPES[e];
          if (decoded === undefined) {
            this.pos = pos;
            this.fail("INVALID_JSON", "syntax", `invalid escape at position ${pos}`);
          }
          c = e;
          out += decoded;
          pos += 2;
        }
        start = pos;
      } else {
        if (c < 0x20) {
          this.pos = pos;
          this.fail("INVALID_JSON", "syntax", `unescaped control character at position ${pos}`);
        }
        pos++;
      }
      units++;
      if (pendingHigh) {
        if (c < 0xdc00 || c > 0xdfff) {
          this.pos = pos;
          this.fail("INVALID_JSON", "loneSurrogate", "a string contains an unpaired UTF-16 surrogate");
        }
        pendingHigh = false;
        pairs++;
      } else if (c >= 0xd800 && c <= 0xdbff) pendingHigh = true;
      else if (c >= 0xdc00 && c <= 0xdfff) {
        this.pos = pos;
        this.fail("INVALID_JSON", "loneSurrogate", "a string contains an unpaired UTF-16 surrogate");
      }
    }
    this.pos = pos;
    if (pendingHigh) this.fail("INVALID_JSON", "loneSurrogate", "a string contains an unpaired UTF-16 surrogate");
    return { value: out, codePoints: units - pairs };
  }

  #number(): number {
    const text = this.#text;
    const start = this.pos;
    let pos = start;
    if (text.charCodeAt(pos) === 0x2d) pos++;
    const first = text.charCodeAt(pos);
    if (first === 0x30) pos++;
    else if (first >= 0x31 && first <= 0x39) pos = digits(text, pos);
    else {
      this.pos = pos;
      this.fail("INVALID_JSON", "syntax", `expected a digit, found ${this.describe()}`);
    }
    let integer = true;
    if (text.charCodeAt(pos) === 0x2e /* . */) {
      integer = false;
      const after = digits(text, pos + 1);
      if (after === pos + 1) {
        this.pos = after;
        this.fail("INVALID_JSON", "syntax", `expected a digit after the decimal point, found ${this.describe()}`);
      }
      pos = after;
    }
    const e = text.charCodeAt(pos);
    if (e === 0x65 || e === 0x45 /* e E */) {
      integer = false;
      pos++;
      const sign = text.charCodeAt(pos);
      if (sign === 0x2b || sign === 0x2d) pos++;
      const after = digits(text, pos);
      if (after === pos) {
        this.pos = after;
        this.fail("INVALID_JSON", "syntax", `expected a digit in the exponent, found ${this.describe()}`);
      }
      pos = after;
    }
    this.pos = pos;
    const value = Number(text.slice(start, pos));
    if (!Number.isFinite(value)) this.fail("INVALID_JSON", "numberRange", "a number is too large to be represented");
    if (integer && !Number.isSafeInteger(value)) {
      this.fail("INVALID_JSON", "numberRange", "an integer is outside ±(2^53−1) and would lose precision; send it as a string");
    }
    return value;
  }

  #literal<T extends JsonValue>(word: string, value: T): T {
    if (!this.#text.startsWith(word, this.pos)) this.fail("INVALID_JSON", "syntax", `unexpected ${this.describe()}`);
    this.pos += word.length;
    return value;
  }
}

function digits(text: string, pos: number): number {
  for (;;) {
    const c = text.charCodeAt(pos);
    if (c >= 0x30 && c <= 0x39) pos++;
    else return pos;
  }
}
