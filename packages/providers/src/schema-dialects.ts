import type { Schema, Type } from "@google/genai";
import type { JsonValue } from "@toolgate/contracts";
import { closeObjectSchemas, resolvePointer } from "@toolgate/registry";

type JsonObject = Record<string, unknown>;

function isObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function token(key: string): string {
  return key.replace(/~/g, "~0").replace(/\//g, "~1");
}

/** A keyword left out of an exported schema, where it was. */
export interface DroppedKeyword {
  pointer: string;
  message: string;
}

// ---------------------------------------------------------------------------------------------------------
// What a model is shown: the input schema as the registry enforces it, every object closed.

/** In-place subschemas next to which `additionalProperties` would not see every declared property. */
const IN_PLACE = ["allOf", "anyOf", "oneOf", "$ref", "$dynamicRef", "if", "then", "else", "dependentSchemas"];

/**
 * The input schema with every object closed exactly as the registry closes it when it compiles the contract, so
 * a model is never offered a field the runtime refuses. Where the closure sits on a plain object it is written
 * `additionalProperties: false` (the same constraint there, and the form every provider reads); next to
 * composed subschemas it stays `unevaluatedProperties: false`. A schema that cannot be closed is refused, as
 * the registry refuses it.
 */
export function enforcedInputSchema(schema: JsonObject): { ok: true; schema: JsonObject } | { ok: false; reason: string } {
  const closure = closeObjectSchemas(schema);
  if (!closure.ok) return { ok: false, reason: `${closure.message} (at ${closure.pointer || "/"})` };
  const document = closure.schema;
  if (!isObject(document)) return { ok: false, reason: "the input schema is not an object schema" };
  for (const pointer of closure.closed) {
    const node = resolvePointer(document as JsonValue, pointer);
    if (!isObject(node) || IN_PLACE.some((k) => k in node)) continue;
    delete node.unevaluatedProperties;
    node.additionalProperties = false;
  }
  return { ok: true, schema: document };
}

// ---------------------------------------------------------------------------------------------------------
// OpenAI strict mode (Structured Outputs): a subset of JSON Schema in which every object is closed and lists
// every property as required. Keywords outside the subset that only narrow a value are dropped (the runtime
// still enforces them); keywords that change structure make the schema unfit for strict mode.

/** Validation keywords strict mode accepts, besides the structural ones handled below. */
const OPENAI_STRICT_KEYWORDS = new Set([
  "type",
  "description",
  "enum",
  "const",
  "pattern",
  "format",
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum",
  "multipleOf",
  "minItems",
  "maxItems",
]);
const OPENAI_STRICT_FORMATS = new Set(["date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"]);
/** Annotations dropped without a note: they carry no constraint. */
const ANNOTATIONS = new Set(["title", "examples", "default", "$comment", "deprecated", "readOnly", "writeOnly", "$schema", "$id"]);
/** Structure strict mode cannot express without changing what the schema accepts. */
const OPENAI_UNFIT = [
  "allOf",
  "oneOf",
  "not",
  "if",
  "then",
  "else",
  "prefixItems",
  "contains",
  "patternProperties",
  "unevaluatedProperties",
  "unevaluatedItems",
  "dependentSchemas",
  "propertyNames",
  "$dynamicRef",
];
const OPENAI_MAX_DEPTH = 10;
const OPENAI_MAX_PROPERTIES = 5_000;
const OPENAI_MAX_ENUM_VALUES = 1_000;

/**
 * The schema in OpenAI's strict subset, or why it cannot be strict without accepting different arguments (an
 * open object, an optional property, a tuple…). Dropped narrowing keywords are listed.
 */
export function toOpenAIStrict(schema: JsonObject): { ok: true; schema: JsonObject; dropped: DroppedKeyword[] } | { ok: false; reason: string } {
  const dropped: DroppedKeyword[] = [];
  let properties = 0;
  if (schema.type !== "object") return { ok: false, reason: "the root of a strict schema must be an object" };
  const convert = (node: unknown, pointer: string, depth: number): unknown => {
    if (!isObject(node)) throw new Unfit(`${pointer || "/"} is a boolean schema`);
    if (depth > OPENAI_MAX_DEPTH) throw new Unfit(`the schema nests deeper than ${OPENAI_MAX_DEPTH} levels`);
    for (const keyword of OPENAI_UNFIT) if (keyword in node) throw new Unfit(`${keyword} at ${pointer || "/"} has no strict-mode equivalent`);
    const out: JsonObject = {};
    for (const [key, value] of Object.entries(node)) {
      const at = `${pointer}/${token(key)}`;
      switch (key) {
        case "properties": {
          if (!isObject(value)) throw new Unfit(`properties at ${pointer || "/"} is not an object`);
          const converted: JsonObject = {};
          for (const [name, sub] of Object.entries(value)) {
            properties++;
            converted[name] = convert(sub, `${at}/${token(name)}`, depth + 1);
          }
          if (properties > OPENAI_MAX_PROPERTIES) throw new Unfit(`more than ${OPENAI_MAX_PROPERTIES} properties`);
          out.properties = converted;
          break;
        }
        case "items":
          out.items = convert(value, at, depth + 1);
          break;
        case "anyOf":
          if (!Array.isArray(value)) throw new Unfit(`anyOf at ${pointer || "/"} is not a list`);
          out.anyOf = value.map((sub, i) => convert(sub, `${at}/${i}`, depth + 1));
          break;
        case "$defs":
        case "definitions":
          if (!isObject(value)) throw new Unfit(`${key} at ${pointer || "/"} is not an object`);
          out[key] = Object.fromEntries(Object.entries(value).map(([name, sub]) => [name, convert(sub, `${at}/${token(name)}`, 1)]));
          break;
        case "$ref":
        case "required":
        case "additionalProperties":
          out[key] = value;
          break;
        case "format":
          if (typeof value === "string" && OPENAI_STRICT_FORMATS.has(value)) out.format = value;
          else dropped.push({ pointer: at, message: `format ${JSON.stringify(value)} is not supported in strict mode; the runtime still checks it` });
          break;
        case "enum":
          if (Array.isArray(value) && value.length > OPENAI_MAX_ENUM_VALUES)
            throw new Unfit(`an enum at ${pointer || "/"} has more than ${OPENAI_MAX_ENUM_VALUES} values`);
          out.enum = value;
          break;
        default:
          if (OPENAI_STRICT_KEYWORDS.has(key)) out[key] = value;
          else if (!ANNOTATIONS.has(key)) dropped.push({ pointer: at, message: `${key} is not supported in strict mode; the runtime still enforces it` });
      }
    }
    const accepts = typeof node.type === "string" ? [node.type] : Array.isArray(node.type) ? node.type : [];
    if (accepts.includes("object") || "properties" in node) {
      if (node.additionalProperties !== false) throw new Unfit(`the object at ${pointer || "/"} is open (additionalProperties is not false)`);
      const names = Object.keys(isObject(node.properties) ? node.properties : {});
      const required = new Set(Array.isArray(node.required) ? node.required : []);
      const optional = names.filter((n) => !required.has(n));
      if (optional.length > 0)
        throw new Unfit(`${optional.map((n) => `${pointer}/properties/${token(n)}`).join(", ")} optional (strict mode requires every property)`);
      out.required = names;
    }
    return out;
  };
  try {
    return { ok: true, schema: convert(schema, "", 1) as JsonObject, dropped };
  } catch (error) {
    if (error instanceof Unfit) return { ok: false, reason: error.message };
    throw error;
  }
}

/** Why a schema has no equivalent in a dialect; caught inside this module. */
class Unfit extends Error {}

// ---------------------------------------------------------------------------------------------------------
// Gemini's schema (an OpenAPI 3.0 subset): upper-case types, `nullable`, string-valued integer bounds, string
// enums, no additionalProperties, no $ref. Local references are inlined; recursion cannot be expressed.

const GEMINI_TYPES: Record<string, `${Type}`> = {
  string: "STRING",
  number: "NUMBER",
  integer: "INTEGER",
  boolean: "BOOLEAN",
  array: "ARRAY",
  object: "OBJECT",
  null: "NULL",
};
/** Formats Gemini's schema documents (strings: date-time, enum; numbers: float, double, int32, int64). */
const GEMINI_FORMATS = new Set(["date-time", "float", "double", "int32", "int64"]);
const INT64_KEYWORDS = ["minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"] as const;

/** The schema in Gemini's subset, or why it has none (recursion, allOf, a remote reference). */
export function toGeminiSchema(schema: JsonObject): { ok: true; schema: Schema; dropped: DroppedKeyword[] } | { ok: false; reason: string } {
  const dropped: DroppedKeyword[] = [];
  const resolve = (ref: string, stack: readonly string[]): unknown => {
    if (stack.includes(ref)) throw new Unfit(`${ref} is recursive, which Gemini's schema cannot express`);
    if (!ref.startsWith("#/")) throw new Unfit(`${ref} is not a local reference`);
    let current: unknown = schema;
    for (const raw of ref.slice(2).split("/")) {
      current = isObject(current) ? current[raw.replace(/~1/g, "/").replace(/~0/g, "~")] : undefined;
    }
    if (current === undefined) throw new Unfit(`${ref} does not resolve`);
    return current;
  };
  const convert = (node: unknown, pointer: string, stack: readonly string[]): Schema => {
    if (node === true) return {};
    if (!isObject(node)) throw new Unfit(`${pointer || "/"} is not a schema object`);
    if (typeof node.$ref === "string") return convert(resolve(node.$ref, stack), pointer, [...stack, node.$ref]);
    if ("allOf" in node || "not" in node || "if" in node || "$dynamicRef" in node)
      throw new Unfit(`${pointer || "/"} combines schemas in a way Gemini cannot express`);
    const out: Schema = {};
    const types = typeof node.type === "string" ? [node.type] : Array.isArray(node.type) ? node.type.filter((t): t is string => typeof t === "string") : [];
    const nonNull = types.filter((t) => t !== "null");
    if (types.includes("null")) out.nullable = true;
    if (nonNull.length === 1) out.type = GEMINI_TYPES[nonNull[0]!] as Type;
    else if (nonNull.length > 1) out.anyOf = nonNull.map((t) => ({ type: GEMINI_TYPES[t] as Type }));
    const literals = "const" in node ? [node.const] : Array.isArray(node.enum) ? node.enum : undefined;
    if (literals !== undefined) {
      if (literals.every((v) => typeof v === "string")) {
        out.enum = literals;
        out.type ??= "STRING" as Type;
      } else dropped.push({ pointer: `${pointer}/enum`, message: "Gemini takes only string enums; the runtime still checks the values" });
    }
    for (const [key, value] of Object.entries(node)) {
      const at = `${pointer}/${token(key)}`;
      switch (key) {
        case "type":
        case "enum":
        case "const":
        case "$defs":
        case "definitions":
        case "$schema":
        case "$id":
        case "$comment":
          break;
        case "description":
        case "title":
        case "pattern":
          if (typeof value === "string") out[key] = value;
          break;
        case "format":
          if (typeof value === "string" && GEMINI_FORMATS.has(value)) out.format = value;
          else dropped.push({ pointer: at, message: `format ${JSON.stringify(value)} is not one Gemini knows; the runtime still checks it` });
          break;
        case "default":
          out.default = value;
          break;
        case "minimum":
        case "maximum":
          if (typeof value === "number") out[key] = value;
          break;
        case "exclusiveMinimum":
        case "exclusiveMaximum":
          if (typeof value === "number" && nonNull.length === 1 && nonNull[0] === "integer")
            out[key === "exclusiveMinimum" ? "minimum" : "maximum"] = key === "exclusiveMinimum" ? value + 1 : value - 1;
          else dropped.push({ pointer: at, message: `${key} is not in Gemini's schema; the runtime still enforces it` });
          break;
        case "properties":
          if (isObject(value)) {
            out.properties = Object.fromEntries(Object.entries(value).map(([name, sub]) => [name, convert(sub, `${at}/${token(name)}`, stack)]));
            out.propertyOrdering = Object.keys(value);
          }
          break;
        case "required":
          if (Array.isArray(value)) out.required = value.filter((v): v is string => typeof v === "string");
          break;
        case "items":
          if (value !== false) out.items = convert(value, at, stack);
          break;
        case "anyOf":
        case "oneOf":
          if (Array.isArray(value)) out.anyOf = value.map((sub, i) => convert(sub, `${at}/${i}`, stack));
          if (key === "oneOf") dropped.push({ pointer: at, message: "oneOf is sent as anyOf; the runtime still requires exactly one" });
          break;
        case "additionalProperties":
          // Gemini's schema has no additionalProperties; a closed object is the runtime's to enforce.
          if (value !== false) dropped.push({ pointer: at, message: "additionalProperties is not in Gemini's schema" });
          break;
        default:
          if ((INT64_KEYWORDS as readonly string[]).includes(key)) {
            if (typeof value === "number") out[key as (typeof INT64_KEYWORDS)[number]] = String(value);
          } else dropped.push({ pointer: at, message: `${key} is not in Gemini's schema; the runtime still enforces it` });
      }
    }
    return out;
  };
  try {
    return { ok: true, schema: convert(schema, "", []), dropped };
  } catch (error) {
    if (error instanceof Unfit) return { ok: false, reason: error.message };
    throw error;
  }
}

/** A Gemini schema as JSON Schema 2020-12 (lower-case types, `nullable` as a type list, numeric bounds). */
export function fromGeminiSchema(schema: Schema): JsonObject {
  const out: JsonObject = {};
  const declared: string | undefined = typeof schema.type === "string" ? String(schema.type) : undefined;
  const type = declared !== undefined && declared !== "TYPE_UNSPECIFIED" ? declared.toLowerCase() : undefined;
  if (type !== undefined) out.type = schema.nullable ? [type, "null"] : type;
  if (schema.description !== undefined) out.description = schema.description;
  if (schema.title !== undefined) out.title = schema.title;
  if (schema.enum !== undefined) out.enum = schema.nullable ? [...schema.enum, null] : schema.enum;
  if (schema.format !== undefined && schema.format !== "enum") out.format = schema.format;
  if (schema.pattern !== undefined) out.pattern = schema.pattern;
  if (schema.default !== undefined) out.default = schema.default;
  if (schema.minimum !== undefined) out.minimum = schema.minimum;
  if (schema.maximum !== undefined) out.maximum = schema.maximum;
  for (const key of INT64_KEYWORDS) {
    const value = schema[key];
    if (value !== undefined && /^\d+$/.test(value)) out[key] = Number(value);
  }
  if (schema.properties !== undefined) out.properties = Object.fromEntries(Object.entries(schema.properties).map(([k, v]) => [k, fromGeminiSchema(v)]));
  if (schema.required !== undefined) out.required = schema.required;
  if (schema.items !== undefined) out.items = fromGeminiSchema(schema.items);
  if (schema.anyOf !== undefined) out.anyOf = schema.anyOf.map(fromGeminiSchema);
  return out;
}
