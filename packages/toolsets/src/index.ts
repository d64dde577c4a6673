export { ToolsetNameSchema, toolsetContracts, toolsetDefinitions, type ToolsetName, type ToolsetDependencies } from "./toolsets.js";
export { benchContracts, benchTools, ExecutionCounter, type ExecutionReport } from "./bench-tools.js";
export { chaosContracts, chaosTools, CHAOS_HTTP_ORIGIN, MUTABLE_GREET_DEFINITION_HASH } from "./chaos-tools.js";
export { operationContracts, operationTools, getOperationContract, cancelOperationContract, type OperationControl } from "./operation-tools.js";
export { mcpExampleContracts, MCP_EXAMPLE_PINS } from "./mcp-example-tools.js";
export { EffectLedger, duplicateEffects, type EffectRecord } from "./effect-ledger.js";
