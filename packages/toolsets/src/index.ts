export {
  LINTED_TOOLSETS,
  ToolsetNameSchema,
  ToolsetUnavailableError,
  toolsetContracts,
  toolsetDefinitions,
  type ToolsetName,
  type ToolsetDependencies,
} from "./toolsets.js";
export { operationContracts, operationTools, getOperationContract, cancelOperationContract, type OperationControl } from "./operation-tools.js";
export { mcpExampleContracts, MCP_EXAMPLE_PINS } from "./mcp-example-tools.js";
