export { ToolContractSchema, MAX_ARGUMENT_DEPTH, contractHash, type ToolContract, type ToolContractInput } from "./contract.js";
export {
  ToolRegistry,
  ContractCompiler,
  ContractError,
  fixedContracts,
  type CurrentContracts,
  type CompiledTool,
  type ArgumentCheck,
  type ResultCheck,
} from "./registry.js";
export {
  defineTool,
  layeredHandler,
  type ToolDefinition,
  type ToolHandler,
  type ToolContext,
  type ToolOutcome,
  type ObjectResolver,
  type StatePrecheck,
} from "./define-tool.js";
export { jsonDepth, utf8Length } from "@toolgate/contracts";
export { JSON_POINTER_PATTERN, pointerTokens, pointerOf, resolvePointer, replaceAtPointers } from "./json-pointer.js";
export { closeObjectSchemas, type Closure } from "./schema-closure.js";
export { REDACTED, writes, effectHints, resourceKeys, type ResourceRef, type KeyFacts } from "./tool-semantics.js";
export { parseStrictJson, type StrictJsonLimits, type StrictJsonError, type StrictJsonResult } from "./strict-json.js";
export { walkSchema, valueBounds, type JsonSchema, type ValueBounds } from "./schema-walk.js";
export { lintContract, lintContracts, LINT_RULES, type LintRule, type LintFinding, type LintReport } from "./contract-lint.js";
export { poisonFindings, POISON_RULES, type PoisonRule, type PoisonFinding } from "./poison-rules.js";
export { parseContractDocument, loadContractFiles, loadContractModule, type SourcedContract } from "./contract-files.js";
export {
  ContractCatalog,
  CatalogError,
  type CatalogConnection,
  type ContractCatalogOptions,
  type CatalogChange,
  type CatalogRejection,
  type PublishOutcome,
  type QuarantineReason,
  type QuarantineRequest,
  type QuarantineEntry,
  type ApproveOutcome,
} from "./contract-catalog.js";
export { admitDefinitions, type Admission, type AdmissionCatalog } from "./quarantine.js";
export { mcpDefinitionHash, definitionHashOf, type McpToolDefinition } from "./definition-hash.js";
export { benchmarkValidation, type ValidationCase, type ValidationMeasurement, type ValidationBenchmarkOptions } from "./bench-validation.js";
