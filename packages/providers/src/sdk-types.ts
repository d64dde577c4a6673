// The providers' own types, imported from their official SDKs as types only: the adapters need no SDK at run
// time, and a change in a provider's format fails `tsc` here rather than in production.
import type { Content, FunctionDeclaration, GenerateContentResponse, Part, Schema, Tool as GeminiTool } from "@google/genai";
import type {
  Message as AnthropicMessage,
  MessageParam as AnthropicMessageParam,
  Tool as AnthropicTool,
  ToolResultBlockParam,
  ToolUseBlock,
} from "@anthropic-ai/sdk/resources/messages/messages";
import type {
  CallToolRequest,
  CallToolResult,
  JSONRPCRequest,
  JSONRPCResultResponse,
  ListToolsResult,
  Tool as McpTool,
} from "@modelcontextprotocol/sdk/types.js";
import type {
  ChatCompletion,
  ChatCompletionFunctionTool,
  ChatCompletionMessage,
  ChatCompletionMessageFunctionToolCall,
  ChatCompletionTool,
  ChatCompletionToolMessageParam,
} from "openai/resources/chat/completions/completions";
import type { FunctionTool, Response, ResponseFunctionToolCall, ResponseInputItem, ResponseOutputItem } from "openai/resources/responses/responses";

export type {
  AnthropicMessage,
  AnthropicMessageParam,
  AnthropicTool,
  ToolResultBlockParam,
  ToolUseBlock,
  CallToolRequest,
  CallToolResult,
  JSONRPCRequest,
  JSONRPCResultResponse,
  ListToolsResult,
  McpTool,
  ChatCompletion,
  ChatCompletionFunctionTool,
  ChatCompletionMessage,
  ChatCompletionMessageFunctionToolCall,
  ChatCompletionTool,
  ChatCompletionToolMessageParam,
  FunctionTool,
  Response,
  ResponseFunctionToolCall,
  ResponseInputItem,
  ResponseOutputItem,
  Content,
  FunctionDeclaration,
  GenerateContentResponse,
  GeminiTool,
  Part,
  Schema,
};

/** A `tools/call` request as it arrives over JSON-RPC. */
export type McpToolCallRequest = JSONRPCRequest & CallToolRequest;

/** The JSON-RPC answer to a `tools/call` request. */
export type McpToolCallResponse = JSONRPCResultResponse & { result: CallToolResult };

/** Gemini's response as plain JSON (the SDK's class adds getters that a payload from the wire does not have). */
export type GeminiResponse = Pick<GenerateContentResponse, "candidates" | "modelVersion" | "responseId" | "usageMetadata">;

/** A Chat Completions tool message answering one function tool call. */
export type OpenAIChatToolMessage = ChatCompletionToolMessageParam;

/** A Responses API `function_call_output` input item. */
export type OpenAIFunctionCallOutput = ResponseInputItem.FunctionCallOutput;

/**
 * Compile-time check that `Value` (a provider SDK's type) still has the shape `Shape` an adapter reads or
 * writes: `type _ = Accepts<Shape, SdkType>` stops compiling when the provider's format drifts.
 */
export type Accepts<Shape, Value extends Shape> = Value;
