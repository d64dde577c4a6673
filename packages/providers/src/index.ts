import { ToolContractSchema, type ToolContract, type ToolContractInput } from "@toolgate/registry";
import { exportAnthropic, formatAnthropic, importAnthropic, parseAnthropic } from "./anthropic.js";
import { providerError } from "./calls.js";
import { exportGemini, formatGemini, importGemini, parseGemini } from "./gemini.js";
import { exportMcp, formatMcp, importMcp, parseMcp } from "./mcp.js";
import { exportChat, exportResponses, formatChat, formatResponses, importChat, importResponses, parseChat, parseResponses } from "./openai.js";
import { draftImports } from "./import-drafts.js";
import { enforcedInputSchema } from "./schema-dialects.js";
import { PROVIDER_NAME_RULES, providerAcceptsName } from "./tool-names.js";
import type {
  CallResult,
  DefinitionsResult,
  ExportOptions,
  ExportResult,
  FormatResult,
  ImportOptions,
  ImportResult,
  ParsedToolCall,
  ParseOptions,
  ParseResult,
  ProviderName,
} from "./types.js";

/**
 * The tool calls in a provider's model output: OpenAI Responses `function_call` items, Chat Completions
 * `tool_calls`, Anthropic `tool_use` blocks, Gemini `functionCall` parts or MCP `tools/call` requests.
 * A payload that breaks the provider's format is a typed error; a call to an unknown tool, or whose argument
 * text is not a JSON object, carries a `problem` (the runtime answers it with that code). Never throws.
 */
export function parseToolCalls(provider: ProviderName, payload: unknown, options: ParseOptions = {}): ParseResult {
  switch (provider) {
    case "openai-responses":
      return parseResponses(payload, options);
    case "openai-chat":
      return parseChat(payload, options);
    case "anthropic":
      return parseAnthropic(payload, options);
    case "gemini":
      return parseGemini(payload, options);
    case "mcp":
      return parseMcp(payload, options);
    default:
      return unknownProvider(provider);
  }
}

/**
 * The results as the provider takes them back, one per call under the call's own id and in the calls' order,
 * whatever order the results came in: `function_call_output` items, `role: "tool"` messages, `tool_result`
 * blocks (`is_error`), `functionResponse` parts, or JSON-RPC responses with a `CallToolResult` (`isError`,
 * `structuredContent`). A call without exactly one result is a typed error. Never throws.
 */
export function formatResults<P extends ProviderName>(provider: P, calls: readonly ParsedToolCall[], results: readonly CallResult[]): FormatResult<P>;
export function formatResults(provider: ProviderName, calls: readonly ParsedToolCall[], results: readonly CallResult[]): FormatResult<ProviderName> {
  switch (provider) {
    case "openai-responses":
      return formatResponses(calls, results);
    case "openai-chat":
      return formatChat(calls, results);
    case "anthropic":
      return formatAnthropic(calls, results);
    case "gemini":
      return formatGemini(calls, results);
    case "mcp":
      return formatMcp(calls, results);
    default:
      return unknownProvider(provider);
  }
}

/**
 * The enabled contracts as the provider's tool definitions, honouring its constraints (OpenAI strict mode,
 * Gemini's schema subset). Keywords a dialect cannot express are left out and listed in `notes`: the runtime
 * still enforces them. A contract that does not parse, or has no equivalent, is a typed error.
 */
export function exportTools<P extends ProviderName>(
  provider: P,
  contracts: readonly (ToolContract | ToolContractInput)[],
  options?: ExportOptions,
): ExportResult<P>;
export function exportTools(
  provider: ProviderName,
  contracts: readonly (ToolContract | ToolContractInput)[],
  options: ExportOptions = {},
): ExportResult<ProviderName> {
  if (!Object.hasOwn(PROVIDER_NAME_RULES, provider)) return unknownProvider(provider as never);
  const parsed: ToolContract[] = [];
  for (const [i, input] of contracts.entries()) {
    const contract = ToolContractSchema.safeParse(input);
    if (!contract.success)
      return providerError("INVALID_CONTRACT", `contract ${i} is not a valid contract: ${contract.error.issues[0]?.message ?? ""}`, `/${i}`);
    if (!contract.data.enabled) continue;
    const { name } = contract.data;
    if (!providerAcceptsName(provider, name)) return providerError("INVALID_CONTRACT", `${provider} does not accept the tool name ${name}`, `/${i}/name`);
    // Offered as enforced: an object the registry closes is shown closed, so strict mode can hold it.
    const enforced = enforcedInputSchema(contract.data.input_schema);
    if (!enforced.ok) return providerError("INVALID_CONTRACT", `the input schema of ${name} cannot be closed: ${enforced.reason}`, `/${i}/input_schema`);
    parsed.push({ ...contract.data, input_schema: enforced.schema });
  }
  switch (provider) {
    case "openai-responses":
      return exportResponses(parsed, options);
    case "openai-chat":
      return exportChat(parsed, options);
    case "anthropic":
      return exportAnthropic(parsed);
    case "gemini":
      return exportGemini(parsed);
    case "mcp":
      return exportMcp(parsed);
    default:
      return unknownProvider(provider);
  }
}

/**
 * A provider's tool definitions as draft contracts. Each tool gets a safe name (snake_case, accepted by every
 * provider, one NATS subject token; a short stable suffix when the name is cut or two names meet) and keeps its
 * original name as an alias, so a model that calls it by that name still reaches it. The runtime half is
 * assumed on the safe side (an unknown side effect is a write needing approval) and listed in `assumed`;
 * `findings` is what the contract linter wants completed. Provider-specific tools (hosted, server or custom
 * tools) are skipped. A definition that breaks the provider's format, or a name given twice, is a typed error.
 * Never throws.
 */
export function importTools(provider: ProviderName, definitions: unknown, options: ImportOptions = {}): ImportResult {
  const read = readDefinitions(provider, definitions);
  return read.ok ? draftImports(read.tools, options) : read;
}

function readDefinitions(provider: ProviderName, definitions: unknown): DefinitionsResult {
  switch (provider) {
    case "openai-responses":
      return importResponses(definitions);
    case "openai-chat":
      return importChat(definitions);
    case "anthropic":
      return importAnthropic(definitions);
    case "gemini":
      return importGemini(definitions);
    case "mcp":
      return importMcp(definitions);
    default:
      return unknownProvider(provider);
  }
}

function unknownProvider(provider: never): { ok: false; error: { code: "MALFORMED_PAYLOAD"; message: string } } {
  return { ok: false, error: { code: "MALFORMED_PAYLOAD", message: `unknown provider ${JSON.stringify(String(provider).slice(0, 32))}` } };
}

export { observation, observationText, provenanceNote, MAX_OBSERVATION_BYTES } from "./calls.js";
export { toOpenAIStrict, toGeminiSchema, fromGeminiSchema, enforcedInputSchema, type DroppedKeyword } from "./schema-dialects.js";
export { PROVIDER_NAME_RULES, MAX_SAFE_NAME_LENGTH, providerAcceptsName, isSafeToolName, safeToolNames, snakeToolName } from "./tool-names.js";
export { draftContract } from "./import-drafts.js";
export {
  PROVIDERS,
  type ProviderName,
  type ProviderError,
  type ProviderErrorCode,
  type CallProblem,
  type ParsedToolCall,
  type ParseResult,
  type ParseOptions,
  type KnownTools,
  type CallResult,
  type Provenance,
  type FormattedResults,
  type FormatResult,
  type ToolDefinitions,
  type ExportNote,
  type ExportResult,
  type ExportOptions,
  type ToolHints,
  type ImportedTool,
  type ImportResult,
  type ImportOptions,
  type ProviderToolDefinition,
  type AssumedDefault,
} from "./types.js";
export type {
  AnthropicMessage,
  AnthropicMessageParam,
  AnthropicTool,
  ToolResultBlockParam,
  ToolUseBlock,
  CallToolRequest,
  CallToolResult,
  ListToolsResult,
  McpTool,
  McpToolCallRequest,
  McpToolCallResponse,
  ChatCompletion,
  ChatCompletionFunctionTool,
  ChatCompletionMessage,
  OpenAIChatToolMessage,
  FunctionTool,
  Response as OpenAIResponse,
  ResponseFunctionToolCall,
  OpenAIFunctionCallOutput,
  GeminiResponse,
  Content as GeminiContent,
  FunctionDeclaration,
  Part as GeminiPart,
} from "./sdk-types.js";
