import { canonicalHash, type JsonValue, type ToolRef, type Violation } from "@toolgate/contracts";
import { Ajv2020, type ErrorObject, type ValidateFunction } from "ajv/dist/2020.js";
import formatsModule from "ajv-formats";
import { contractHash, ToolContractSchema, type ToolContract, type ToolContractInput } from "./contract.js";
import { jsonDepth, utf8Length } from "./json-limits.js";

const addFormats = formatsModule.default;

/** A contract that cannot be compiled (bad JSON Schema, duplicate name): a programmer or deploy error. */
export class ContractError extends Error {
  readonly code = "INVALID_CONTRACT";
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "ContractError";
  }
}

/** A contract with its schemas compiled once and its content hash. */
export interface CompiledTool {
  readonly contract: ToolContract;
  readonly hash: string;
  readonly ref: ToolRef;
}

/** Outcome of the structural validation layer: normalized arguments and their hash, or typed violations. */
export type ArgumentCheck =
  | { ok: true; arguments: Record<string, JsonValue>; argsHash: string }
  | { ok: false; code: "INVALID_JSON" | "INVALID_ARGUMENTS"; message: string; violations: Violation[] };

/** Outcome of output validation: the result is forwarded only when `ok`. */
export type ResultCheck =
  { ok: true; bytes: number } | { ok: false; code: "INVALID_TOOL_RESULT" | "RESULT_TOO_LARGE"; message: string; violations: Violation[] };

interface Entry extends CompiledTool {
  readonly input: ValidateFunction;
  readonly output: ValidateFunction;
}

/**
 * The set of contracts a service acts on. Schemas are compiled once with ajv (JSON Schema 2020-12, strict,
 * no type coercion, defaults applied to a copy); validation returns results and never throws on bad input.
 */
export class ToolRegistry {
  readonly #tools = new Map<string, Entry>();

  private constructor() {}

  /** Builds a registry; throws {@link ContractError} when a contract or its schemas are invalid. */
  static from(contracts: readonly ToolContractInput[]): ToolRegistry {
    const registry = new ToolRegistry();
    // One ajv per registry: compiled schemas are cached by it and never shared across registries.
    const ajv = new Ajv2020({ strict: true, allErrors: true, coerceTypes: false, useDefaults: true, validateFormats: true });
    addFormats(ajv);
    for (const input of contracts) {
      const parsed = ToolContractSchema.safeParse(input);
      if (!parsed.success) {
        throw new ContractError(
          `invalid contract ${(input as { name?: string }).name ?? "(unnamed)"}: ${parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`,
        );
      }
      const contract = parsed.data;
      if (registry.#tools.has(contract.name)) throw new ContractError(`duplicate tool name ${contract.name}`);
      let inputValidator: ValidateFunction;
      let outputValidator: ValidateFunction;
      try {
        inputValidator = ajv.compile(contract.input_schema);
        outputValidator = ajv.compile(contract.output_schema);
      } catch (error) {
        throw new ContractError(`schemas of ${contract.name} do not compile: ${(error as Error).message}`, { cause: error });
      }
      const hash = contractHash(contract);
      registry.#tools.set(contract.name, {
        contract,
        hash,
        ref: { name: contract.name, version: contract.version, hash },
        input: inputValidator,
        output: outputValidator,
      });
    }
    return registry;
  }

  /** The compiled tool called `name`, if registered. */
  get(name: string): CompiledTool | undefined {
    return this.#tools.get(name);
  }

  /** Every registered tool, in registration order. */
  list(): CompiledTool[] {
    return [...this.#tools.values()];
  }

  /**
   * Structural layer: size and depth limits before parsing, JSON parse, then the input schema (unknown
   * fields rejected, defaults applied). The normalized arguments and their canonical hash travel with the call.
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
    const depth = jsonDepth(argumentsJson);
    if (depth > limits.max_depth) {
      return invalid(`arguments nest ${depth} levels; the limit is ${limits.max_depth}`, [
        { pointer: "", message: `must nest at most ${limits.max_depth} levels`, keyword: "maxDepth" },
      ]);
    }
    let value: unknown;
    try {
      value = JSON.parse(argumentsJson);
    } catch (error) {
      return { ok: false, code: "INVALID_JSON", message: `arguments are not valid JSON: ${(error as Error).message.slice(0, 160)}`, violations: [] };
    }
    if (typeof value !== "object" || value === null || Array.isArray(value)) {
      return invalid("arguments must be a JSON object", [{ pointer: "", message: "must be object", keyword: "type" }]);
    }
    if (!entry.input(value)) {
      const violations = toViolations(entry.input.errors ?? []);
      return invalid(
        `arguments do not match the ${entry.contract.name} schema: ${violations.map((v) => `${v.pointer || "/"} ${v.message}`).join("; ")}`,
        violations,
      );
    }
    const normalized = value as Record<string, JsonValue>;
    return { ok: true, arguments: normalized, argsHash: canonicalHash(normalized) };
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
    const entry = this.#tools.get(tool.contract.name);
    if (!entry || entry.hash !== tool.hash) throw new ContractError(`tool ${tool.contract.name}@${tool.hash} is not in this registry`);
    return entry;
  }
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
    if (e.keyword === "additionalProperties" && typeof params.additionalProperty === "string") pointer += `/${escapePointer(params.additionalProperty)}`;
    const message = e.keyword === "additionalProperties" ? "is not an allowed property" : (e.message ?? e.keyword);
    return { pointer, message, keyword: e.keyword };
  });
}

function escapePointer(token: string): string {
  return token.replace(/~/g, "~0").replace(/\//g, "~1");
}
