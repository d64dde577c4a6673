import type { JsonValue, ResultEnvelope } from "@toolgate/contracts";
import type { LintFinding, ToolContractInput } from "@toolgate/registry";
import type {
  AnthropicTool,
  ChatCompletionFunctionTool,
  FunctionDeclaration,
  FunctionTool,
  McpTool,
  McpToolCallResponse,
  OpenAIChatToolMessage,
  OpenAIFunctionCallOutput,
  Part,
  ToolResultBlockParam,
} from "./sdk-types.js";

/** The provider dialects Toolgate speaks. */
export const PROVIDERS = ["openai-responses", "openai-chat", "anthropic", "gemini", "mcp"] as const;
export type ProviderName = (typeof PROVIDERS)[number];

/**
 * A problem in a payload that does not follow the provider's own format (no or duplicate call ids, arguments
 * of the wrong JSON type, a NUL, control character or unpaired surrogate in a call id, tool name or argument
 * key), or a result set that does not answer the calls one to one.
 */
export type ProviderErrorCode =
  | "MALFORMED_PAYLOAD"
  | "INVALID_CHARACTERS"
  | "MISSING_CALL_ID"
  | "DUPLICATE_CALL_ID"
  | "MISSING_TOOL_NAME"
  | "ARGUMENTS_NOT_OBJECT"
  | "UNSUPPORTED_MESSAGE"
  | "MISSING_RESULT"
  | "UNEXPECTED_RESULT"
  | "MALFORMED_RESULT"
  | "INVALID_CONTRACT"
  | "DUPLICATE_TOOL_NAME";

/** A typed error: adapters return it, they never throw on a bad payload. */
export interface ProviderError {
  code: ProviderErrorCode;
  message: string;
  /** RFC 6901 pointer into the payload, where known. */
  pointer?: string;
}

/**
 * What is wrong with one call that is otherwise well-formed: the model can correct it, and the runtime answers
 * it with the same error code under the call's id when it is submitted.
 */
export interface CallProblem {
  code: "UNKNOWN_TOOL" | "INVALID_JSON" | "INVALID_ARGUMENTS";
  message: string;
}

/** One tool call in Toolgate's terms, with what is needed to answer it in the provider's. */
export interface ParsedToolCall {
  /** The provider's call id, unique within the payload (Gemini: generated when the model sent none). */
  id: string;
  /** The tool name as the model called it; results go back under it. */
  name: string;
  /**
   * The contract's name, when the model called the tool by one of its aliases (such as the name it was imported
   * under) and the call was parsed with a registry as `options.tools`.
   */
  tool?: string;
  /** The arguments as JSON text, exactly as the model produced them (object arguments are serialized). */
  argumentsJson: string;
  /** MCP: the JSON-RPC request id, answered with its own type. Gemini: the id was generated. */
  origin?: { jsonrpcId: string | number } | { generatedId: true };
  /** Set when the call names a tool that is not offered or its arguments are not a JSON object. */
  problem?: CallProblem;
}

export type ParseResult = { ok: true; calls: ParsedToolCall[] } | { ok: false; error: ProviderError };

/**
 * Which tools exist, to flag calls to any other name: a `Set` of names, or a registry, whose lookup also
 * resolves aliases to the contract they name.
 */
export type KnownTools = ReadonlySet<string> | { get(name: string): unknown };

export interface ParseOptions {
  /** Tools on offer; a call to another name gets an UNKNOWN_TOOL problem. */
  tools?: KnownTools;
  /** Chat Completions: which choice to read (default 0). */
  choice?: number;
}

/** The terminal result of one call, keyed by the provider's call id. */
export interface CallResult {
  id: string;
  result: ResultEnvelope;
  /** Where the result came from; when given, the model sees the result wrapped as data with it. */
  provenance?: Provenance;
}

/** The origin of a result, shown to the model with it: which tool, which contract version, whether it is untrusted content. */
export interface Provenance {
  tool: string;
  contract_version: string;
  untrusted: boolean;
}

/** What {@link formatResults} produces for each provider: the SDK's own input types. */
export interface FormattedResults {
  "openai-responses": OpenAIFunctionCallOutput[];
  "openai-chat": OpenAIChatToolMessage[];
  anthropic: ToolResultBlockParam[];
  gemini: Part[];
  mcp: McpToolCallResponse[];
}

export type FormatResult<P extends ProviderName> = { ok: true; output: FormattedResults[P] } | { ok: false; error: ProviderError };

/** What {@link exportTools} produces for each provider: the SDK's own tool-definition types. */
export interface ToolDefinitions {
  "openai-responses": FunctionTool[];
  "openai-chat": ChatCompletionFunctionTool[];
  anthropic: AnthropicTool[];
  gemini: FunctionDeclaration[];
  mcp: McpTool[];
}

/** A keyword or feature a provider's schema dialect cannot express, left out of the exported definition. */
export interface ExportNote {
  tool: string;
  /** JSON pointer into the tool's input schema. */
  pointer: string;
  message: string;
}

export type ExportResult<P extends ProviderName> = { ok: true; tools: ToolDefinitions[P]; notes: ExportNote[] } | { ok: false; error: ProviderError };

export interface ExportOptions {
  /**
   * OpenAI: `auto` (default) marks a tool strict when its schema fits strict mode without changing what it
   * accepts (every object closed, every property required, only supported keywords otherwise dropped);
   * `never` sends every schema as written, non-strict.
   */
  openaiStrict?: "auto" | "never";
}

/** Tool-use hints a provider's definition carries (MCP annotations). */
export interface ToolHints {
  readOnly?: boolean;
  destructive?: boolean;
  idempotent?: boolean;
  openWorld?: boolean;
}

/** The model-facing half of a contract, as a provider defines a tool, before its name is made safe. */
export interface ProviderToolDefinition {
  name: string;
  description: string;
  input_schema: Record<string, unknown>;
  output_schema?: Record<string, unknown>;
  hints?: ToolHints;
}

/** A default an imported draft takes because the provider's definition does not say (or cannot be trusted to). */
export interface AssumedDefault {
  /** JSON pointer into the draft contract. */
  pointer: string;
  value: JsonValue;
  reason: string;
}

/**
 * One imported tool: the provider's definition under a safe name, and a draft contract that completes it with
 * explicit, cautious defaults. The draft is to be reviewed: `findings` is what the contract linter wants done.
 */
export interface ImportedTool extends ProviderToolDefinition {
  /** The safe name: snake_case, within every provider's rules, one NATS subject token. */
  name: string;
  /** The name as the provider defined it; the draft keeps it as an alias when it differs. */
  original_name: string;
  contract: ToolContractInput;
  assumed: AssumedDefault[];
  findings: LintFinding[];
}

export type ImportResult = { ok: true; tools: ImportedTool[] } | { ok: false; error: ProviderError };

/** What one dialect's importer reads: the definitions as the provider wrote them. */
export type DefinitionsResult = { ok: true; tools: ProviderToolDefinition[] } | { ok: false; error: ProviderError };

export interface ImportOptions {
  /** Names already in use (the registry's): an imported tool whose safe name would be one gets a suffix. */
  taken?: ReadonlySet<string>;
}
