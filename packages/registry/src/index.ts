export { ToolContractSchema, contractHash, type ToolContract, type ToolContractInput } from "./contract.js";
export { ToolRegistry, ContractError, type CompiledTool, type ArgumentCheck, type ResultCheck } from "./registry.js";
export {
  defineTool,
  type ToolDefinition,
  type ToolHandler,
  type ToolContext,
  type ToolOutcome,
  type ObjectResolver,
  type StatePrecheck,
} from "./define-tool.js";
export { jsonDepth, utf8Length } from "./json-limits.js";
