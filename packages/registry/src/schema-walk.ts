/** A JSON Schema (2020-12) document or subschema. */
export type JsonSchema = boolean | { readonly [keyword: string]: unknown };

/** Keywords whose value is a map of subschemas. */
const MAP_APPLICATORS = ["properties", "patternProperties", "$defs", "definitions", "dependentSchemas"] as const;
/** Keywords whose value is one subschema. */
const SINGLE_APPLICATORS = [
  "additionalProperties",
  "items",
  "contains",
  "propertyNames",
  "not",
  "if",
  "then",
  "else",
  "unevaluatedItems",
  "unevaluatedProperties",
  "contentSchema",
] as const;
/** Keywords whose value is a list of subschemas. */
const LIST_APPLICATORS = ["prefixItems", "allOf", "anyOf", "oneOf"] as const;
/** Keywords that combine the subschema with others at the same location. */
const COMBINATORS = ["allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas", "$ref", "$dynamicRef"] as const;

const JSON_TYPES = ["null", "boolean", "object", "array", "number", "integer", "string"] as const;
type JsonType = (typeof JSON_TYPES)[number];

export function isSchemaObject(schema: unknown): schema is { readonly [keyword: string]: unknown } {
  return typeof schema === "object" && schema !== null && !Array.isArray(schema);
}

function escapeToken(token: string): string {
  return token.replace(/~/g, "~0").replace(/\//g, "~1");
}

/**
 * Calls `visit` for every subschema reachable through the 2020-12 applicators, with its location as a JSON
 * pointer into the schema document (e.g. `/properties/query`) and the applicator keyword that led to it
 * (undefined at the root). Boolean subschemas are visited too.
 */
export function walkSchema(schema: unknown, visit: (schema: JsonSchema, pointer: string, via: string | undefined) => void): void {
  walk(schema, visit, "", undefined, 0);
}

function walk(
  schema: unknown,
  visit: (schema: JsonSchema, pointer: string, via: string | undefined) => void,
  pointer: string,
  via: string | undefined,
  guard: number,
): void {
  if (typeof schema === "boolean") {
    visit(schema, pointer, via);
    return;
  }
  if (!isSchemaObject(schema) || guard > 64) return;
  visit(schema, pointer, via);
  for (const keyword of MAP_APPLICATORS) {
    const map = schema[keyword];
    if (isSchemaObject(map)) for (const [key, sub] of Object.entries(map)) walk(sub, visit, `${pointer}/${keyword}/${escapeToken(key)}`, keyword, guard + 1);
  }
  for (const keyword of SINGLE_APPLICATORS) {
    if (keyword in schema) walk(schema[keyword], visit, `${pointer}/${keyword}`, keyword, guard + 1);
  }
  for (const keyword of LIST_APPLICATORS) {
    const list = schema[keyword];
    if (Array.isArray(list)) list.forEach((sub, i) => walk(sub, visit, `${pointer}/${keyword}/${i}`, keyword, guard + 1));
  }
}

/** Applicators whose subschema only narrows a value that another subschema at the same place also describes. */
export const NARROWING_APPLICATORS: ReadonlySet<string> = new Set([
  "allOf",
  "anyOf",
  "oneOf",
  "not",
  "if",
  "then",
  "else",
  "dependentSchemas",
  "contains",
  "propertyNames",
  "contentSchema",
]);

/** The JSON types a subschema accepts at its own location, ignoring combinators (which can only narrow them). */
export function acceptedTypes(schema: JsonSchema): ReadonlySet<JsonType> {
  if (schema === false) return new Set();
  if (schema === true) return new Set(JSON_TYPES);
  if ("const" in schema) return new Set([typeOf(schema.const)]);
  if (Array.isArray(schema.enum)) return new Set(schema.enum.map(typeOf));
  const type = schema.type;
  const declared = typeof type === "string" ? [type] : Array.isArray(type) ? type.filter((t): t is string => typeof t === "string") : JSON_TYPES;
  const types = new Set(declared.filter((t): t is JsonType => (JSON_TYPES as readonly string[]).includes(t)));
  if (types.has("number")) types.add("integer");
  return types;
}

function typeOf(value: unknown): JsonType {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  switch (typeof value) {
    case "string":
      return "string";
    case "boolean":
      return "boolean";
    case "number":
      return Number.isInteger(value) ? "integer" : "number";
    default:
      return "object";
  }
}

/** Whether the subschema combines with others at its location ($ref, allOf, anyOf…), which a local analysis cannot see through. */
export function hasCombinators(schema: JsonSchema): boolean {
  return isSchemaObject(schema) && COMBINATORS.some((k) => k in schema);
}

/**
 * Whether an object accepted here can carry properties the schema does not name: `additionalProperties` is
 * absent or not `false`, and no `unevaluatedProperties: false` closes it on its own.
 */
export function isOpenObject(schema: JsonSchema): boolean {
  if (typeof schema === "boolean") return schema;
  if (!acceptedTypes(schema).has("object") || "const" in schema || "enum" in schema) return false;
  if (schema.additionalProperties === false) return false;
  if (schema.additionalProperties === undefined && schema.unevaluatedProperties === false) return false;
  return true;
}

/** Upper bounds of every value a schema accepts, anywhere inside it. Infinity means the schema sets none. */
export interface ValueBounds {
  /** Longest string value, in code points. */
  string: number;
  /** Most items of any array. */
  items: number;
  /** Deepest nesting of objects and arrays (`{}` is 1, a scalar 0). */
  depth: number;
}

const UNBOUNDED: ValueBounds = { string: Infinity, items: Infinity, depth: Infinity };
const NOTHING: ValueBounds = { string: 0, items: 0, depth: 0 };

/**
 * Conservative bounds of the values a schema accepts: never lower than the real maximum, so refusing a value
 * above them never refuses one the schema accepts. Local `$ref`s are followed; recursion, remote references and
 * open objects or arrays make a bound infinite.
 */
export function valueBounds(schema: unknown): ValueBounds {
  return bounds(schema, schema, []);
}

function bounds(schema: unknown, root: unknown, refs: readonly string[]): ValueBounds {
  if (schema === false) return NOTHING;
  if (schema === true || !isSchemaObject(schema) || refs.length > 32) return UNBOUNDED;
  if ("$dynamicRef" in schema) return UNBOUNDED;
  if (typeof schema.$ref === "string") {
    const ref = schema.$ref;
    const target = ref.startsWith("#") && !refs.includes(ref) ? resolveLocalRef(root, ref) : undefined;
    // The value satisfies the target, so the target's bounds hold whatever the siblings add.
    return target === undefined ? UNBOUNDED : bounds(target, root, [...refs, ref]);
  }
  if ("const" in schema) return literalBounds([schema.const]);
  if (Array.isArray(schema.enum)) return literalBounds(schema.enum);
  const types = acceptedTypes(schema);
  const combined = hasCombinators(schema);
  let result: ValueBounds = {
    string: types.has("string") ? stringMaxLength(schema) : 0,
    items: 0,
    depth: 0,
  };
  const merge = (child: ValueBounds) => {
    result = {
      string: Math.max(result.string, child.string),
      items: Math.max(result.items, child.items),
      depth: Math.max(result.depth, 1 + child.depth),
    };
  };
  if (types.has("object")) {
    merge(NOTHING);
    const children: unknown[] = [];
    if (isSchemaObject(schema.properties)) children.push(...Object.values(schema.properties));
    if (isSchemaObject(schema.patternProperties)) children.push(...Object.values(schema.patternProperties));
    const additional = schema.additionalProperties;
    if (additional === undefined || additional === true) {
      // unevaluatedProperties sees properties evaluated by combinators, which this analysis does not follow.
      const unevaluated = schema.unevaluatedProperties;
      if (unevaluated === undefined || unevaluated === true || combined) children.push(true);
      else children.push(unevaluated);
    } else children.push(additional);
    for (const child of children) merge(bounds(child, root, refs));
  }
  if (types.has("array")) {
    const prefix = Array.isArray(schema.prefixItems) ? schema.prefixItems : [];
    const items = schema.items;
    const closedAfterPrefix = items === false || (items === undefined && schema.unevaluatedItems === false && !combined);
    const maxItems = numberOr(schema.maxItems, Infinity);
    result = { ...result, items: Math.max(result.items, closedAfterPrefix ? Math.min(maxItems, prefix.length) : maxItems) };
    merge(NOTHING);
    for (const child of prefix) merge(bounds(child, root, refs));
    if (!closedAfterPrefix) merge(bounds(items === undefined ? (schema.unevaluatedItems ?? true) : items, root, refs));
  }
  return result;
}

/** The subschema a local reference (`#/$defs/x`, `#`) names, if any. */
function resolveLocalRef(root: unknown, ref: string): unknown {
  if (ref === "#") return root;
  if (!ref.startsWith("#/")) return undefined;
  let current: unknown = root;
  for (const raw of ref.slice(2).split("/")) {
    let token: string;
    try {
      token = decodeURIComponent(raw).replace(/~1/g, "/").replace(/~0/g, "~");
    } catch {
      return undefined;
    }
    if (!isSchemaObject(current) && !Array.isArray(current)) return undefined;
    current = (current as Record<string, unknown>)[token];
    if (current === undefined) return undefined;
  }
  return current;
}

function numberOr(value: unknown, fallback: number): number {
  return typeof value === "number" && Number.isFinite(value) && value >= 0 ? value : fallback;
}

/** Bounds of a fixed set of values (`enum`, `const`). */
function literalBounds(values: readonly unknown[]): ValueBounds {
  let bounds = NOTHING;
  const visit = (value: unknown, depth: number) => {
    if (typeof value === "string") bounds = { ...bounds, string: Math.max(bounds.string, [...value].length) };
    else if (Array.isArray(value)) {
      bounds = { ...bounds, items: Math.max(bounds.items, value.length), depth: Math.max(bounds.depth, depth + 1) };
      for (const item of value) visit(item, depth + 1);
    } else if (isSchemaObject(value)) {
      bounds = { ...bounds, depth: Math.max(bounds.depth, depth + 1) };
      for (const item of Object.values(value)) visit(item, depth + 1);
    }
  };
  for (const value of values) visit(value, 0);
  return bounds;
}

/**
 * Longest string an anchored pattern (`^…$`) can match, in code points, or Infinity when it has no bound (no
 * anchors, `*`, `+`, `{n,}`, backreferences, or syntax this analysis does not follow). Literals, escapes,
 * classes, `.`, groups, alternation, `?` and `{n}`/`{n,m}` are understood.
 */
export function patternMaxLength(pattern: string): number {
  if (!pattern.startsWith("^") || !pattern.endsWith("$") || pattern.endsWith("\\$")) return Infinity;
  const body = pattern.slice(1, -1);
  let pos = 0;
  // sequence := (atom quantifier?)* ; alternation := sequence ('|' sequence)*
  const alternation = (): number => {
    let max = sequence();
    while (body[pos] === "|") {
      pos++;
      max = Math.max(max, sequence());
    }
    return max;
  };
  const sequence = (): number => {
    let total = 0;
    while (pos < body.length && body[pos] !== "|" && body[pos] !== ")") {
      const atom = atomLength();
      total += atom * quantifier();
    }
    return total;
  };
  const atomLength = (): number => {
    const c = body[pos];
    if (c === "(") {
      pos++;
      if (body[pos] === "?") {
        // Non-capturing groups only; lookarounds and named groups are not followed.
        if (body[pos + 1] !== ":") throw new Error("unsupported group");
        pos += 2;
      }
      const inner = alternation();
      if (body[pos] !== ")") throw new Error("unbalanced group");
      pos++;
      return inner;
    }
    if (c === "[") {
      pos++;
      if (body[pos] === "^") pos++;
      if (body[pos] === "]") pos++;
      while (pos < body.length && body[pos] !== "]") pos += body[pos] === "\\" ? 2 : 1;
      if (body[pos] !== "]") throw new Error("unterminated class");
      pos++;
      return 1;
    }
    if (c === "\\") {
      const next = body[pos + 1];
      if (next === undefined || /[1-9k]/.test(next)) throw new Error("backreference");
      if (next === "u" && body[pos + 2] === "{") pos = body.indexOf("}", pos) + 1;
      else if (next === "u") pos += 6;
      else if (next === "x") pos += 4;
      else if (next === "p" || next === "P") pos = body.indexOf("}", pos) + 1;
      else if (next === "b" || next === "B") {
        pos += 2;
        return 0;
      } else pos += 2;
      return 1;
    }
    if (c === "^" || c === "$") {
      pos++;
      return 0;
    }
    if (c === "*" || c === "+" || c === "?" || c === "{") throw new Error("dangling quantifier");
    pos += c !== undefined && c.codePointAt(0)! > 0xffff ? 2 : 1;
    return 1;
  };
  const quantifier = (): number => {
    const c = body[pos];
    let max: number;
    if (c === "*" || c === "+") throw new Error("unbounded");
    if (c === "?") {
      pos++;
      max = 1;
    } else if (c === "{") {
      const match = /^\{(\d+)(,(\d*))?\}/.exec(body.slice(pos));
      if (!match) throw new Error("bad quantifier");
      if (match[2] !== undefined && match[3] === "") throw new Error("unbounded");
      max = Number(match[3] ?? match[1]);
      pos += match[0].length;
    } else return 1;
    if (body[pos] === "?") pos++;
    return max;
  };
  try {
    const max = alternation();
    return pos === body.length ? max : Infinity;
  } catch {
    return Infinity;
  }
}

/** Longest string a subschema accepts at its own location, from `maxLength` and an anchored `pattern`. */
export function stringMaxLength(schema: { readonly [keyword: string]: unknown }): number {
  const byLength = typeof schema.maxLength === "number" && schema.maxLength >= 0 ? schema.maxLength : Infinity;
  const byPattern = typeof schema.pattern === "string" ? patternMaxLength(schema.pattern) : Infinity;
  return Math.min(byLength, byPattern);
}
