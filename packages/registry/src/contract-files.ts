import { readdir, readFile, stat } from "node:fs/promises";
import { extname, join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { parse as parseYaml } from "yaml";
import { ContractError } from "./registry.js";
import { isSchemaObject } from "./schema-walk.js";
import { parseStrictJson } from "./strict-json.js";

/** A contract as found in a file or module, before validation, with where it came from. */
export interface SourcedContract {
  /** File path, or `module#export`. */
  source: string;
  contract: unknown;
}

const CONTRACT_EXTENSIONS = new Set([".json", ".yaml", ".yml"]);

/**
 * Reads the contracts in one JSON or YAML document: a contract, a list of contracts, or `{ contracts: [...] }`.
 * JSON must be I-JSON (duplicate keys refused); YAML is read with the core schema, unique keys and few
 * aliases. Throws {@link ContractError} naming `source` when the document is not one of those shapes.
 */
export function parseContractDocument(text: string, format: "json" | "yaml", source = "(document)"): unknown[] {
  let document: unknown;
  if (format === "json") {
    const parsed = parseStrictJson(text, { maxDepth: 64 });
    if (!parsed.ok) throw new ContractError(`${source}: ${parsed.error.message}`);
    document = parsed.value;
  } else {
    try {
      document = parseYaml(text, { schema: "core", uniqueKeys: true, maxAliasCount: 50, strict: true, prettyErrors: true });
    } catch (error) {
      throw new ContractError(`${source}: ${(error as Error).message}`, { cause: error });
    }
    const problem = notJson(document, "");
    if (problem !== undefined) throw new ContractError(`${source}: ${problem}`);
  }
  if (Array.isArray(document)) return document;
  if (isSchemaObject(document) && Array.isArray(document.contracts)) return document.contracts as unknown[];
  if (isSchemaObject(document)) return [document];
  throw new ContractError(`${source}: expected a contract, a list of contracts or { contracts: [...] }`);
}

/**
 * Reads every contract in the given files and directories (recursively: `*.json`, `*.yaml`, `*.yml`), in a
 * stable order. Throws {@link ContractError} for an unreadable or malformed file.
 */
export async function loadContractFiles(paths: readonly string[]): Promise<SourcedContract[]> {
  const found: SourcedContract[] = [];
  for (const path of paths) {
    for (const file of await contractFiles(path)) {
      let text: string;
      try {
        text = await readFile(file, "utf8");
      } catch (error) {
        throw new ContractError(`${file}: ${(error as Error).message}`, { cause: error });
      }
      const format = extname(file) === ".json" ? "json" : "yaml";
      found.push(...parseContractDocument(text, format, file).map((contract) => ({ source: file, contract })));
    }
  }
  return found;
}

/**
 * Imports a JavaScript module and collects the contracts it exports: contract objects, lists of them, and a
 * tool-set module's `toolsetContracts(names)` called with every name of its `ToolsetNameSchema` (or, when the module
 * exports `LINTED_TOOLSETS`, with those: a set of fixtures whose names an outside suite dictates is not linted
 * as contracts of Toolgate's own). Contracts found twice with the same content are kept once by the caller (the linter and publisher compare hashes).
 */
export async function loadContractModule(path: string): Promise<SourcedContract[]> {
  let module: Record<string, unknown>;
  try {
    module = (await import(pathToFileURL(resolve(path)).href)) as Record<string, unknown>;
  } catch (error) {
    throw new ContractError(`${path}: cannot import: ${(error as Error).message}`, { cause: error });
  }
  const found: SourcedContract[] = [];
  for (const [name, value] of Object.entries(module)) {
    if (looksLikeContract(value)) found.push({ source: `${path}#${name}`, contract: value });
    else if (Array.isArray(value) && value.length > 0 && value.every(looksLikeContract)) {
      found.push(...(value as unknown[]).map((contract) => ({ source: `${path}#${name}`, contract })));
    }
  }
  const toolsets = module.toolsetContracts;
  const names = Array.isArray(module.LINTED_TOOLSETS) ? module.LINTED_TOOLSETS : (module.ToolsetNameSchema as { options?: unknown } | undefined)?.options;
  if (typeof toolsets === "function" && Array.isArray(names)) {
    // Synchronous or not: a tool-set module may load some of its sets only when asked for them.
    const listed: unknown = await (toolsets as (names: readonly unknown[]) => unknown)(names);
    if (Array.isArray(listed))
      found.push(...(listed as unknown[]).filter(looksLikeContract).map((contract) => ({ source: `${path}#toolsetContracts`, contract })));
  }
  return found;
}

function looksLikeContract(value: unknown): boolean {
  return isSchemaObject(value) && typeof value.name === "string" && isSchemaObject(value.input_schema) && "side_effect" in value;
}

async function contractFiles(path: string): Promise<string[]> {
  let info;
  try {
    info = await stat(path);
  } catch (error) {
    throw new ContractError(`${path}: ${(error as Error).message}`, { cause: error });
  }
  if (!info.isDirectory()) return [path];
  const files: string[] = [];
  for (const entry of (await readdir(path, { withFileTypes: true })).sort((a, b) => a.name.localeCompare(b.name))) {
    const full = join(path, entry.name);
    if (entry.isDirectory()) files.push(...(await contractFiles(full)));
    else if (CONTRACT_EXTENSIONS.has(extname(entry.name))) files.push(full);
  }
  return files;
}

/** Why a YAML value is not plain JSON (infinite or NaN numbers, non-plain objects), or undefined. */
function notJson(value: unknown, pointer: string): string | undefined {
  if (value === null || typeof value === "string" || typeof value === "boolean") return undefined;
  if (typeof value === "number") return Number.isFinite(value) ? undefined : `${pointer || "/"}: ${value} is not a JSON number`;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const problem = notJson(value[i], `${pointer}/${i}`);
      if (problem !== undefined) return problem;
    }
    return undefined;
  }
  if (isSchemaObject(value) && Object.getPrototypeOf(value) === Object.prototype) {
    for (const [key, item] of Object.entries(value)) {
      const problem = notJson(item, `${pointer}/${key}`);
      if (problem !== undefined) return problem;
    }
    return undefined;
  }
  return `${pointer || "/"}: not a JSON value`;
}
