import { canonicalJson, sha256, type JsonValue, type ToolRef, type Violation } from "@toolgate/contracts";
import { Ajv2020, type ErrorObject, type ValidateFunction } from "ajv/dist/2020.js";
import formatsModule from "ajv-formats";
import { contractHash, ToolContractSchema, type ToolContract, type ToolContractInput } from "./contract.js";
import { ContractError } from "./contract-error.js";
import { utf8Length } from "@toolgate/contracts";
import { closeObjectSchemas } from "./schema-closure.js";
import { valueBounds, type JsonSchema } from "./schema-walk.js";
import { compileKeyTemplate, redactArguments, redactResult, resourcesOf, writes, type KeyFacts, type ResourceRef } from "./tool-semantics.js";
import { firstSignificantChar, parseStrictJson, type StrictJsonLimits } from "./strict-json.js";

const addFormats = formatsModule.default;

export { ContractError };

/**
 * A contract with its schemas compiled once and its content hash: the one interpreter of the contract. Every
 * service asks it what the contract means instead of reading the contract's fields.
 */
export interface CompiledTool {
  readonly contract: ToolContract;
  readonly hash: string;
  readonly ref: ToolRef;
  /** The input schema as enforced: the contract's, with every object closed (see `closeObjectSchemas`). */
  readonly inputSchema: JsonSchema;
  /** Whether a call changes anything (side effect `write` or `external`). */
  readonly writes: boolean;
  /** Whether results are content from outside (web pages, documents): they taint the run. */
  readonly untrustedOutput: boolean;
  /** Whether the contract marks anything sensitive, in the arguments and in a result's data. */
  readonly redacts: { readonly arguments: boolean; readonly results: boolean };
  /** The resources the arguments name, one per contract resource pointer. */
  resources(args: JsonValue): ResourceRef[];
  /** The arguments with every sensitive value redacted, for logs, approvers and audit records. */
  redactArguments(args: Record<string, JsonValue>): Record<string, JsonValue>;
  /** A result's data with every sensitive value redacted, for logs and audit records. */
  redactResult(data: JsonValue): JsonValue;
  /** The call's idempotency key, from trusted facts and the validated arguments; never chosen by the model. */
  idempotencyKey(facts: KeyFacts, args: Record<string, JsonValue>): string;
}

/** Outcome of the structural validation layer: normalized arguments, their RFC 8785 form and its hash, or typed violations. */
export type ArgumentCheck =
  | { ok: true; arguments: Record<string, JsonValue>; canonical: string; argsHash: string }
  | { ok: false; code: "INVALID_JSON" | "INVALID_ARGUMENTS"; message: string; violations: Violation[] };

/** Outcome of output validation: the result is forwarded only when `ok`. */
export type ResultCheck =
  { ok: true; bytes: number } | { ok: false; code: "INVALID_TOOL_RESULT" | "RESULT_TOO_LARGE"; message: string; violations: Violation[] };

interface Entry extends CompiledTool {
  readonly input: ValidateFunction;
  readonly output: ValidateFunction;
  /** Limits checked while parsing, derived once from the input schema and the contract. */
  readonly parseLimits: StrictJsonLimits;
}

const compiledEntries = new WeakSet<CompiledTool>();

/**
 * Compiles contracts once (JSON Schema 2020-12, strict, no type coercion, defaults applied to the parsed
 * arguments, own properties only, so `constructor` or `__proto__` never resolve through a prototype) and
 * caches them by content hash. Registries built from one compiler share its compiled validators.
 */
export class ContractCompiler {
  readonly #ajv: Ajv2020;
  readonly #byHash = new Map<string, Entry>();

  constructor() {
    this.#ajv = new Ajv2020({ strict: true, allErrors: true, coerceTypes: false, useDefaults: true, validateFormats: true, ownProperties: true });
    addFormats(this.#ajv);
  }

  /** Validates and compiles one contract; throws {@link ContractError} when the contract or its schemas are invalid. */
  compile(input: ToolContractInput): CompiledTool {
    const parsed = ToolContractSchema.safeParse(input);
    if (!parsed.success) {
      throw new ContractError(`invalid contract ${describeName(input)}: ${parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`);
    }
    const contract = parsed.data;
    const hash = contractHash(contract);
    const cached = this.#byHash.get(hash);
    if (cached) return cached;
    const closure = closeObjectSchemas(withoutId(contract.input_schema));
    if (!closure.ok) throw new ContractError(`the input schema of ${contract.name} cannot refuse unknown fields: ${closure.message}`);
    const inputSchema = closure.schema;
    const idempotencyKey = compileKeyTemplate(contract);
    let inputValidator: ValidateFunction;
    let outputValidator: ValidateFunction;
    try {
      // Compiled without the cache key ajv derives from $id, so two versions of one tool never collide.
      inputValidator = this.#ajv.compile(inputSchema as object);
      outputValidator = this.#ajv.compile(withoutId(contract.output_schema));
    } catch (error) {
      throw new ContractError(`schemas of ${contract.name} do not compile: ${(error as Error).message}`, { cause: error });
    }
    const bounds = valueBounds(contract.input_schema);
    const entry: Entry = {
      contract,
      hash,
      ref: { name: contract.name, version: contract.version, hash },
      inputSchema,
      writes: writes(contract),
      untrustedOutput: contract.untrusted_output,
      redacts: { arguments: contract.sensitive.length > 0, results: contract.sensitive_results.length > 0 },
      resources: (args) => resourcesOf(contract, args),
      redactArguments: (args) => redactArguments(contract, args),
      redactResult: (data) => redactResult(contract, data),
      idempotencyKey,
      input: inputValidator,
      output: outputValidator,
      parseLimits: {
        maxDepth: contract.limits.max_depth,
        // A bound of 0 means the schema accepts no string (or array) at all: ajv then names the type that is expected.
        ...(Number.isFinite(bounds.string) && bounds.string > 0 ? { maxStringLength: bounds.string } : {}),
        ...(Number.isFinite(bounds.items) && bounds.items > 0 ? { maxArrayItems: bounds.items } : {}),
      },
    };
    this.#byHash.set(hash, entry);
    compiledEntries.add(entry);
    return entry;
  }
}

/**
 * The set of contracts a service acts on: one current version per tool name, plus retained versions that are
 * addressable only by content hash (a call validated against an older hash is checked against exactly that
 * contract). Validation returns results and never throws on bad input.
 */
export class ToolRegistry {
  readonly #byName = new Map<string, Entry>();
  readonly #byAlias = new Map<string, Entry>();
  readonly #byHash = new Map<string, Entry>();

  private constructor(current: readonly Entry[], retained: readonly Entry[], aliasClash: "throw" | "drop") {
    for (const entry of current) {
      if (this.#byName.has(entry.contract.name)) throw new ContractError(`duplicate tool name ${entry.contract.name}`);
      this.#byName.set(entry.contract.name, entry);
      this.#byHash.set(entry.hash, entry);
    }
    // An alias that could mean two tools, or another tool's own name, would let a call reach the wrong one: it
    // names no tool (a name always wins), or refuses the whole set when the caller asked for that.
    const ambiguous = new Set<string>();
    for (const entry of current) {
      for (const alias of entry.contract.aliases) {
        if (alias === entry.contract.name) continue;
        const other = this.#byName.get(alias) ?? this.#byAlias.get(alias);
        if (other !== undefined && other !== entry) {
          if (aliasClash === "throw") {
            throw new ContractError(`the alias ${JSON.stringify(alias.slice(0, 64))} of ${entry.contract.name} is also a name of ${other.contract.name}`);
          }
          ambiguous.add(alias);
        }
        this.#byAlias.set(alias, entry);
      }
    }
    for (const alias of ambiguous) this.#byAlias.delete(alias);
    for (const entry of retained) this.#byHash.set(entry.hash, entry);
  }

  /**
   * Builds a registry from contracts (one per name) and, optionally, older versions kept addressable by hash.
   * Throws {@link ContractError} when a contract or its schemas are invalid, a name repeats, or an alias is
   * another tool's name or alias.
   */
  static from(contracts: readonly ToolContractInput[], options: { retained?: readonly ToolContractInput[]; compiler?: ContractCompiler } = {}): ToolRegistry {
    const compiler = options.compiler ?? new ContractCompiler();
    return new ToolRegistry(
      contracts.map((c) => compiler.compile(c) as Entry),
      (options.retained ?? []).map((c) => compiler.compile(c) as Entry),
      "throw",
    );
  }

  /**
   * Builds a registry from tools a {@link ContractCompiler} compiled (the catalog's path); throws
   * {@link ContractError} for anything else. One published contract cannot stop every later snapshot: an alias
   * that is another tool's name or alias resolves to no tool instead of failing the build.
   */
  static fromCompiled(current: readonly CompiledTool[], retained: readonly CompiledTool[] = []): ToolRegistry {
    const entries = (tools: readonly CompiledTool[]) =>
      tools.map((tool) => {
        if (!compiledEntries.has(tool)) throw new ContractError(`${tool.ref.name}@${tool.hash} was not compiled by a ContractCompiler`);
        return tool as Entry;
      });
    return new ToolRegistry(entries(current), entries(retained), "drop");
  }

  /**
   * The current version of the tool called `name`, or of the tool that has `name` as an alias (the name it had
   * where it was imported from). The tool's own `contract.name` is the name to record and authorize.
   */
  get(name: string): CompiledTool | undefined {
    return this.#byName.get(name) ?? this.#byAlias.get(name);
  }

  /** Any version this registry holds, current or retained, by content hash. */
  getByHash(hash: string): CompiledTool | undefined {
    return this.#byHash.get(hash);
  }

  /** The current version of every tool, in registration order. */
  list(): CompiledTool[] {
    return [...this.#byName.values()];
  }

  /**
   * Structural layer. In order: the byte limit; then one strict parse that refuses what is not I-JSON
   * (syntax, duplicate keys, lone surrogates, imprecise numbers → INVALID_JSON) and stops at the depth, string
   * and array bounds derived from the contract (→ INVALID_ARGUMENTS) before building the rest; then the input
   * schema (unknown fields rejected, no coercion, defaults applied). The normalized arguments travel with the
   * call in RFC 8785 form, with their hash.
   */
  checkArguments(tool: CompiledTool, argumentsJson: string): ArgumentCheck {
    const entry = this.#entry(tool);
    const { limits } = entry.contract;
    const bytes = utf8Length(argumentsJson);
    if (bytes > limits.max_argument_bytes) {
      return invalid(`arguments are ${bytes} bytes; the limit is ${limits.max_argument_bytes}`, [
        { pointer: "", message: `must be at most ${limits.max_argument_bytes} bytes`, keyword: "maxBytes" },
      ]);
    }
    // Not an object: say so, unless the text is not JSON at all (the string and array bounds do not apply here).
    const objectText = firstSignificantChar(argumentsJson) === "{";
    const parsed = parseStrictJson(argumentsJson, objectText ? entry.parseLimits : { maxDepth: limits.max_depth });
    if (!parsed.ok) {
      const { code, message, pointer, keyword } = parsed.error;
      const violations = [{ pointer, message: message.slice(0, 1024), keyword }];
      const located = pointer === "" ? message : `${message} (at ${pointer})`;
      return code === "INVALID_JSON"
        ? { ok: false, code, message: `arguments are not valid JSON: ${located}`.slice(0, 1024), violations }
        : invalid(located.slice(0, 1024), violations);
    }
    const value = parsed.value;
    if (typeof value !== "object" || value === null || Array.isArray(value)) {
      return invalid("arguments must be a JSON object", [{ pointer: "", message: "must be object", keyword: "type" }]);
    }
    if (!entry.input(value)) {
      const violations = toViolations(entry.input.errors ?? []);
      return invalid(
        `arguments do not match the ${entry.contract.name} schema: ${violations.map((v) => `${v.pointer || "/"} ${v.message}`).join("; ")}`.slice(0, 2048),
        violations,
      );
    }
    const canonical = canonicalJson(value);
    return { ok: true, arguments: value, canonical, argsHash: sha256(canonical) };
  }

  /** Output layer: the result must fit the size limit and match the output schema before it is forwarded. */
  checkResult(tool: CompiledTool, data: unknown): ResultCheck {
    const entry = this.#entry(tool);
    let text: string | undefined;
    try {
      text = JSON.stringify(data);
    } catch {
      text = undefined;
    }
    if (text === undefined) return { ok: false, code: "INVALID_TOOL_RESULT", message: "the tool returned a value that is not JSON", violations: [] };
    const bytes = utf8Length(text);
    if (bytes > entry.contract.limits.max_result_bytes) {
      return {
        ok: false,
        code: "RESULT_TOO_LARGE",
        message: `result is ${bytes} bytes; the limit is ${entry.contract.limits.max_result_bytes}`,
        violations: [],
      };
    }
    if (!entry.output(data)) {
      return {
        ok: false,
        code: "INVALID_TOOL_RESULT",
        message: `the ${entry.contract.name} result does not match its output schema`,
        violations: toViolations(entry.output.errors ?? []),
      };
    }
    return { ok: true, bytes };
  }

  #entry(tool: CompiledTool): Entry {
    const entry = this.#byHash.get(tool.hash);
    if (!entry || entry.contract.name !== tool.contract.name) throw new ContractError(`tool ${tool.contract.name}@${tool.hash} is not in this registry`);
    return entry;
  }
}

function describeName(input: unknown): string {
  const name = typeof input === "object" && input !== null ? (input as { name?: unknown }).name : undefined;
  return typeof name === "string" ? JSON.stringify(name.slice(0, 64)) : "(unnamed)";
}

/** The schema without a root `$id`: ajv refuses to compile two schemas with one id, and versions of a tool may share it. */
function withoutId(schema: Record<string, unknown>): Record<string, unknown> {
  if (!("$id" in schema)) return schema;
  const { $id: _id, ...rest } = schema;
  return rest;
}

function invalid(message: string, violations: Violation[]): ArgumentCheck {
  return { ok: false, code: "INVALID_ARGUMENTS", message, violations };
}

/** ajv errors as JSON pointers a model can act on: the missing or unexpected property is part of the pointer. */
function toViolations(errors: readonly ErrorObject[]): Violation[] {
  return errors.slice(0, 20).map((e) => {
    let pointer = e.instancePath;
    const params = e.params as Record<string, unknown>;
    if (e.keyword === "required" && typeof params.missingProperty === "string") pointer += `/${escapePointer(params.missingProperty)}`;
    // An unknown field, refused by the schema or by the closure the registry added to it.
    const unknown =
      e.keyword === "additionalProperties" ? params.additionalProperty : e.keyword === "unevaluatedProperties" ? params.unevaluatedProperty : undefined;
    if (typeof unknown === "string") pointer += `/${escapePointer(unknown)}`;
    const message = unknown !== undefined ? "is not an allowed property" : (e.message ?? e.keyword);
    return { pointer, message, keyword: e.keyword };
  });
}

function escapePointer(token: string): string {
  return token.replace(/~/g, "~0").replace(/\//g, "~1");
}

/**
 * Where a service reads the contracts in force: the live catalog in a running service, a fixed registry in
 * tests and benchmarks. Read it per call — a catalog swaps its registry when a new version arrives.
 */
export interface CurrentContracts {
  registry(): ToolRegistry;
}

/** A fixed set of contracts, for tests and tools that do not follow the catalog. */
export function fixedContracts(registry: ToolRegistry): CurrentContracts {
  return { registry: () => registry };
}
