import { pointerOf, pointerTokens } from "./json-pointer.js";
import { isSchemaObject, type JsonSchema } from "./schema-walk.js";

/**
 * Closing a contract's input schema: every object it describes refuses properties it does not declare, unless
 * the schema says otherwise at that very place (`additionalProperties` or `unevaluatedProperties`, written on
 * purpose). Tool schemas from the wild leave `additionalProperties` unset, and JSON Schema then accepts any
 * extra field — `force: true` included — which would be hashed, signed and handed to the tool.
 *
 * The closure is `unevaluatedProperties: false` on each schema that describes an object at its own place in
 * the instance (the root, a property's schema, an array's items …). Unlike `additionalProperties`, it sees the
 * properties that in-place subschemas (`allOf`, `anyOf`, `oneOf`, `then`, `else`, `dependentSchemas`, `$ref`)
 * declare, so composed objects stay valid. Conditions (`if`, `not`, `contains`, `propertyNames`) are left as
 * written: closing inside them would change what they test, not what is accepted.
 *
 * Where no single place can hold the closure — a schema without `type: "object"` whose object shape comes from
 * two subschemas that both apply (`allOf` members, a `$ref` and a branch …) — the schema is refused with the
 * place to fix: giving that schema `type: "object"` (then it is closed as a whole) or stating its openness.
 * A schema that says nothing at all about its value (`{}`, `true`) stays an any-value: it declares no fields to
 * be unknown to.
 */

export type Closure = { ok: true; schema: JsonSchema; closed: string[] } | { ok: false; pointer: string; message: string };

/** Subschemas of an object schema that describe other places of the instance (values, items). */
const VALUE_MAPS = ["properties", "patternProperties"] as const;
const VALUE_SINGLES = ["additionalProperties", "unevaluatedProperties", "items", "unevaluatedItems"] as const;
const DEFINITION_MAPS = ["$defs", "definitions"] as const;
/** In-place subschemas that all apply at once, and those of which one applies. */
const CONJUNCTIVE_LISTS = ["allOf"] as const;
const DISJUNCTIVE_LISTS = ["anyOf", "oneOf"] as const;
const BRANCHES = ["then", "else"] as const;

const MAX_NESTING = 64;

class Refusal extends Error {
  constructor(
    readonly pointer: string,
    message: string,
  ) {
    super(message);
  }
}

type Node = Record<string, unknown>;

/** A copy of `schema` with every object it describes closed; `closed` lists where a closure was added. */
export function closeObjectSchemas(schema: JsonSchema): Closure {
  const document = structuredClone(schema);
  const closer = new Closer(document);
  try {
    closer.value(document, "", 0);
    closer.definitions(document, "", 0);
    closer.settleReferences();
  } catch (error) {
    if (error instanceof Refusal) return { ok: false, pointer: error.pointer, message: error.message };
    throw error;
  }
  return { ok: true, schema: document, closed: closer.closed };
}

class Closer {
  readonly closed: string[] = [];
  readonly #root: JsonSchema;
  /** `$ref` targets that must close themselves (referenced where nothing else can), by target pointer → site. */
  readonly #ownClosure = new Map<string, string>();
  /** `$ref` targets used inside an object closed around them together with other declared properties. */
  readonly #sharedUse = new Map<string, string>();

  constructor(root: JsonSchema) {
    this.#root = root;
  }

  /** A schema at its own place in the instance: it ends closed, explicitly open, or not an object schema. */
  value(schema: unknown, pointer: string, depth: number): void {
    if (!isSchemaObject(schema)) return;
    const node: Node = schema;
    guard(depth, pointer);
    if (describesObject(node)) {
      if (!statesOpenness(node)) {
        node.unevaluatedProperties = false;
        this.closed.push(pointer);
      }
      this.#covered(node, pointer, depth, sharesProperties(node));
      return;
    }
    this.#children(node, pointer, depth);
    const parts = objectParts(node, this.#root);
    if (parts.conjunctive.length > 1) {
      throw new Refusal(
        pointer,
        `the object schemas combined at ${pointer || "/"} (${parts.conjunctive.map((p) => p.via).join(", ")}) cannot be closed one by one: ` +
          `give ${pointer || "the root"} "type": "object" so that it is closed as a whole, or state additionalProperties there`,
      );
    }
    // Each alternative (or the single part that applies) describes the whole value: close it where it is.
    for (const member of inPlaceMembers(node, pointer)) {
      if (member.ref !== undefined) this.#needsOwnClosure(member.ref, member.pointer);
      else this.value(member.schema, member.pointer, depth + 1);
    }
  }

  /** Definitions are closed where they are used; what they describe below themselves is closed here. */
  definitions(schema: unknown, pointer: string, depth: number): void {
    if (!isSchemaObject(schema)) return;
    guard(depth, pointer);
    for (const keyword of DEFINITION_MAPS) {
      const map = schema[keyword];
      if (!isSchemaObject(map)) continue;
      for (const [name, definition] of Object.entries(map)) {
        const at = `${pointer}${pointerOf([keyword, name])}`;
        if (isSchemaObject(definition)) this.#covered(definition, at, depth + 1, false);
        this.definitions(definition, at, depth + 1);
      }
    }
  }

  /**
   * Closes the `$ref` targets that no other place could close (and, through them, the targets they name in
   * turn), unless closing one would break another use of it.
   */
  settleReferences(): void {
    const settled = new Set<string>();
    for (;;) {
      const next = [...this.#ownClosure].find(([target]) => !settled.has(target));
      if (next === undefined) return;
      const [target, site] = next;
      settled.add(target);
      const schema = resolveLocalRef(this.#root, target);
      if (schema === undefined) throw new Refusal(site, `cannot follow $ref ${target} at ${site} to close the object it names`);
      if (!isSchemaObject(schema) || statesOpenness(schema) || !mayDescribeObject(schema, this.#root, 0)) continue;
      const shared = this.#sharedUse.get(target);
      if (shared !== undefined) {
        throw new Refusal(
          site,
          `${target} is used both on its own (at ${site}) and combined with other properties (at ${shared}); ` +
            `state additionalProperties or unevaluatedProperties in ${target}`,
        );
      }
      this.value(schema, refPointer(target), 0);
    }
  }

  /**
   * A schema whose object (if any) is closed by an enclosing schema at the same place: its in-place members
   * are too, and the places below it are values of their own.
   */
  #covered(node: Node, pointer: string, depth: number, shared: boolean): void {
    guard(depth, pointer);
    this.#children(node, pointer, depth);
    for (const member of inPlaceMembers(node, pointer)) {
      if (member.ref !== undefined) {
        if (shared) this.#sharedUse.set(member.ref, member.pointer);
        continue;
      }
      if (isSchemaObject(member.schema)) this.#covered(member.schema, member.pointer, depth + 1, shared);
    }
  }

  #children(node: Node, pointer: string, depth: number): void {
    for (const keyword of VALUE_MAPS) {
      const map = node[keyword];
      if (isSchemaObject(map)) for (const [key, sub] of Object.entries(map)) this.value(sub, `${pointer}${pointerOf([keyword, key])}`, depth + 1);
    }
    for (const keyword of VALUE_SINGLES) if (keyword in node) this.value(node[keyword], `${pointer}/${keyword}`, depth + 1);
    const prefix = node.prefixItems;
    if (Array.isArray(prefix)) prefix.forEach((sub, i) => this.value(sub, `${pointer}/prefixItems/${i}`, depth + 1));
  }

  #needsOwnClosure(target: string, site: string): void {
    if (!this.#ownClosure.has(target)) this.#ownClosure.set(target, site);
  }
}

interface Member {
  schema: unknown;
  pointer: string;
  via: string;
  /** The local `$ref` target this member stands for. */
  ref?: string;
}

/** The in-place subschemas of `node` that shape an object: list members, branches, dependent schemas, its `$ref`. */
function inPlaceMembers(node: Node, pointer: string): Member[] {
  const members: Member[] = [];
  for (const keyword of [...CONJUNCTIVE_LISTS, ...DISJUNCTIVE_LISTS]) {
    const list = node[keyword];
    if (Array.isArray(list)) list.forEach((schema, i) => members.push({ schema, pointer: `${pointer}/${keyword}/${i}`, via: `${keyword}/${i}` }));
  }
  for (const keyword of BRANCHES) if (keyword in node) members.push({ schema: node[keyword], pointer: `${pointer}/${keyword}`, via: keyword });
  const dependent = node.dependentSchemas;
  if (isSchemaObject(dependent)) {
    for (const [key, schema] of Object.entries(dependent))
      members.push({ schema, pointer: `${pointer}${pointerOf(["dependentSchemas", key])}`, via: "dependentSchemas" });
  }
  if (typeof node.$ref === "string") members.push({ schema: undefined, pointer: `${pointer}/$ref`, via: "$ref", ref: node.$ref });
  return members;
}

/** Of a schema that is not itself an object schema, the parts that describe an object and apply together. */
function objectParts(node: Node, root: JsonSchema): { conjunctive: Member[] } {
  const conjunctive: Member[] = [];
  const members = inPlaceMembers(node, "");
  const objectish = (member: Member): boolean => {
    const schema = member.ref !== undefined ? resolveLocalRef(root, member.ref) : member.schema;
    return mayDescribeObject(schema, root, 0);
  };
  for (const member of members) {
    if (member.via.startsWith("allOf/") || member.via === "$ref" || member.via === "dependentSchemas") {
      if (objectish(member)) conjunctive.push(member);
    }
  }
  // One branch applies; together they count as one part. So do a list's alternatives.
  const branch = members.filter((m) => m.via === "then" || m.via === "else").find(objectish);
  if (branch) conjunctive.push(branch);
  for (const keyword of DISJUNCTIVE_LISTS) {
    const alternative = members.filter((m) => m.via.startsWith(`${keyword}/`)).find(objectish);
    if (alternative) conjunctive.push(alternative);
  }
  return { conjunctive };
}

function mayDescribeObject(schema: unknown, root: JsonSchema, depth: number): boolean {
  if (!isSchemaObject(schema) || depth > MAX_NESTING) return false;
  const node: Node = schema;
  if (describesObject(node)) return true;
  return inPlaceMembers(node, "").some((m) => mayDescribeObject(m.ref !== undefined ? resolveLocalRef(root, m.ref) : m.schema, root, depth + 1));
}

function describesObject(node: Node): boolean {
  return node.type === "object" || (Array.isArray(node.type) && node.type.includes("object"));
}

function statesOpenness(node: Node): boolean {
  return Object.hasOwn(node, "additionalProperties") || Object.hasOwn(node, "unevaluatedProperties");
}

/** Whether an object schema declares properties besides those its in-place members bring. */
function sharesProperties(node: Node): boolean {
  return VALUE_MAPS.some((k) => isSchemaObject(node[k]) && Object.keys(node[k]).length > 0) || inPlaceMembers(node, "").length > 1;
}

/** The pointer into the schema document of a local `$ref` (`#/$defs/a%20b` → `/$defs/a b`). */
function refPointer(ref: string): string {
  try {
    return decodeURIComponent(ref.slice(1));
  } catch {
    return ref.slice(1);
  }
}

function resolveLocalRef(root: JsonSchema, ref: string): JsonSchema | undefined {
  if (!ref.startsWith("#")) return undefined;
  const tokens = pointerTokens(refPointer(ref));
  if (tokens === undefined) return undefined;
  let current: unknown = root;
  for (const token of tokens) {
    if (!isSchemaObject(current) || !Object.hasOwn(current, token)) return undefined;
    current = current[token];
  }
  return typeof current === "boolean" || isSchemaObject(current) ? current : undefined;
}

function guard(depth: number, pointer: string): void {
  if (depth > MAX_NESTING) throw new Refusal(pointer, `the schema nests deeper than ${MAX_NESTING} levels at ${pointer}`);
}
