import { ContractCompiler, lintContract, type ToolContractInput } from "@toolgate/registry";
import { providerError } from "./calls.js";
import { safeToolNames } from "./tool-names.js";
import type { AssumedDefault, ImportedTool, ImportOptions, ImportResult, ProviderToolDefinition } from "./types.js";

/** Version of every draft: not yet reviewed, so not yet 1.0. */
const DRAFT_VERSION = "0.1.0";
/** Owner of a draft until someone takes it. */
const DRAFT_OWNER = "unassigned";
const DRAFT_TIMEOUT_MS = 30_000;

/**
 * Turns a provider's definitions into imported tools: a safe name for each (the original kept as an alias), a
 * draft contract whose runtime half takes the cautious defaults listed in `assumed`, and the linter's findings
 * on that draft. Two definitions of one name are refused. Never throws.
 */
export function draftImports(definitions: readonly ProviderToolDefinition[], options: ImportOptions = {}): ImportResult {
  const seen = new Set<string>();
  for (const definition of definitions) {
    if (seen.has(definition.name)) {
      return providerError("DUPLICATE_TOOL_NAME", `two definitions are named ${JSON.stringify(definition.name.slice(0, 64))}`);
    }
    seen.add(definition.name);
  }
  const names = safeToolNames(
    definitions.map((d) => d.name),
    options.taken,
  );
  const compiler = new ContractCompiler();
  const tools: ImportedTool[] = definitions.map((definition) => {
    const name = names.get(definition.name)!;
    const { contract, assumed } = draftContract(definition, name);
    return { ...definition, name, original_name: definition.name, contract, assumed, findings: lintContract(contract, compiler).findings };
  });
  return { ok: true, tools };
}

/**
 * The draft contract of one definition. What the provider cannot say is assumed on the safe side: an unknown
 * side effect is a write of medium risk that needs approval, keyed by the runtime so a redelivery cannot repeat
 * it. MCP annotations are a server's claims, not a review: they are noted, never applied.
 */
export function draftContract(definition: ProviderToolDefinition, name: string): { contract: ToolContractInput; assumed: AssumedDefault[] } {
  const assumed: AssumedDefault[] = [];
  const assume = <const T extends AssumedDefault["value"]>(pointer: string, value: T, reason: string): T => {
    assumed.push({ pointer, value, reason });
    return value;
  };
  const hinted = definition.hints?.readOnly === true ? " (the definition hints read-only; hints are not a review)" : "";
  const contract: ToolContractInput = {
    name,
    ...(name === definition.name ? {} : { aliases: [definition.name] }),
    version: assume("/version", DRAFT_VERSION, "a draft: raise it to 1.0.0 once reviewed"),
    description: definition.description,
    owner: assume("/owner", DRAFT_OWNER, "who answers for this tool"),
    input_schema: definition.input_schema,
    output_schema: definition.output_schema ?? assume("/output_schema", {}, "the provider does not describe results: any JSON value is accepted"),
    side_effect: assume("/side_effect", "write", `the side effect is unknown, so it is treated as a write${hinted}`),
    risk: assume("/risk", "medium", "an unknown write is at least of medium risk"),
    approval: assume("/approval", "always", "a medium-risk write needs a human approval until its risk is known"),
    idempotency: assume("/idempotency", { kind: "keyed" }, "keyed by run and call id, so a redelivery does not repeat the effect"),
    timeout_ms: assume("/timeout_ms", DRAFT_TIMEOUT_MS, "how long a call may take"),
    transport: assume("/transport", { kind: "in_process" }, "where the tool runs: an executor's implementation, an HTTP endpoint or an MCP server"),
  };
  return { contract, assumed };
}
