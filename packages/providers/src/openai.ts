import type { ToolContract } from "@toolgate/registry";
import { z } from "zod";
import { CallCollector, malformed, observationText, pairResults, providerError } from "./calls.js";
import { toOpenAIStrict } from "./schema-dialects.js";
import type {
  ChatCompletion,
  ChatCompletionFunctionTool,
  ChatCompletionMessage,
  ChatCompletionMessageFunctionToolCall,
  FunctionTool,
  OpenAIChatToolMessage,
  OpenAIFunctionCallOutput,
  Response,
  ResponseFunctionToolCall,
  ResponseOutputItem,
  Accepts,
} from "./sdk-types.js";
import type {
  CallResult,
  ExportNote,
  ExportOptions,
  ExportResult,
  FormatResult,
  ProviderToolDefinition,
  DefinitionsResult,
  ParsedToolCall,
  ParseOptions,
  ParseResult,
} from "./types.js";

// ---- Responses API --------------------------------------------------------------------------------------

const FunctionCallItem = z.looseObject({
  type: z.literal("function_call"),
  call_id: z.unknown(),
  name: z.unknown(),
  arguments: z.unknown(),
  namespace: z.string().optional(),
});
const ResponsesPayload = z.union([z.looseObject({ output: z.array(z.looseObject({ type: z.string() })) }), z.array(z.looseObject({ type: z.string() }))]);

// What the parser reads, checked against the SDK's own types.
type _ResponsesRead = [
  Accepts<{ output: readonly { type: string }[] }, Response>,
  Accepts<readonly { type: string }[], ResponseOutputItem[]>,
  Accepts<{ type: "function_call"; call_id: string; name: string; arguments: string; namespace?: string | undefined }, ResponseFunctionToolCall>,
];

/**
 * Tool calls of a Responses API response (or its `output` list): every `function_call` item. Other items
 * (messages, reasoning, hosted tools) are the host's. A namespaced call is for a tool Toolgate did not export.
 */
export function parseResponses(payload: unknown, options: ParseOptions = {}): ParseResult {
  const parsed = ResponsesPayload.safeParse(payload);
  if (!parsed.success) return malformed("OpenAI Responses", parsed.error);
  const items = Array.isArray(parsed.data) ? parsed.data : parsed.data.output;
  const base = Array.isArray(parsed.data) ? "" : "/output";
  const collector = new CallCollector(options);
  for (const [i, raw] of items.entries()) {
    if (raw.type !== "function_call") continue;
    const item = FunctionCallItem.safeParse(raw);
    if (!item.success) return malformed("OpenAI Responses", item.error, `${base}/${i}`);
    const { call_id, name, namespace } = item.data;
    const error = collector.add(call_id, namespace === undefined ? name : `${namespace}.${String(name)}`, { text: item.data.arguments }, `${base}/${i}`);
    if (error) return error;
  }
  return collector.result();
}

/** `function_call_output` items answering every call under its own `call_id`, in the calls' order. */
export function formatResponses(calls: readonly ParsedToolCall[], results: readonly CallResult[]): FormatResult<"openai-responses"> {
  const paired = pairResults(calls, results);
  if (!paired.ok) return paired;
  const output: OpenAIFunctionCallOutput[] = paired.pairs.map(([call, result, provenance]) => ({
    type: "function_call_output",
    call_id: call.id,
    output: observationText(result, provenance),
  }));
  return { ok: true, output };
}

/** Function tools for the Responses API; strict where the schema allows (see {@link ExportOptions}). */
export function exportResponses(contracts: readonly ToolContract[], options: ExportOptions): ExportResult<"openai-responses"> {
  const notes: ExportNote[] = [];
  const tools: FunctionTool[] = contracts.map((contract) => {
    const { parameters, strict } = openAIParameters(contract, options, notes);
    return { type: "function", name: contract.name, description: contract.description, parameters, strict };
  });
  return { ok: true, tools, notes };
}

const ResponsesTool = z.looseObject({
  type: z.literal("function"),
  name: z.string().min(1),
  description: z.string().nullish(),
  parameters: z.record(z.string(), z.unknown()).nullable(),
});
type _ResponsesToolRead = Accepts<
  { type: "function"; name: string; description?: string | null | undefined; parameters: Record<string, unknown> | null },
  FunctionTool
>;

/** Function tools of the Responses API as the model-facing half of contracts (other tool types are skipped). */
export function importResponses(definitions: unknown): DefinitionsResult {
  const list = z.array(z.looseObject({ type: z.string() })).safeParse(definitions);
  if (!list.success) return malformed("OpenAI Responses tools", list.error);
  const tools: ProviderToolDefinition[] = [];
  for (const [i, raw] of list.data.entries()) {
    if (raw.type !== "function") continue;
    const tool = ResponsesTool.safeParse(raw);
    if (!tool.success) return malformed("OpenAI Responses tools", tool.error, `/${i}`);
    tools.push({ name: tool.data.name, description: tool.data.description ?? "", input_schema: tool.data.parameters ?? { type: "object", properties: {} } });
  }
  return { ok: true, tools };
}

// ---- Chat Completions -----------------------------------------------------------------------------------

const ChatToolCall = z.looseObject({ id: z.unknown(), type: z.string(), function: z.looseObject({ name: z.unknown(), arguments: z.unknown() }).optional() });
const ChatMessage = z.looseObject({ tool_calls: z.array(z.looseObject({ type: z.string() })).nullish(), function_call: z.unknown().optional() });
const ChatPayload = z.union([z.looseObject({ choices: z.array(z.looseObject({ message: ChatMessage })) }), ChatMessage]);

type _ChatRead = [
  Accepts<{ choices: readonly { message: { tool_calls?: readonly { type: string }[] | null | undefined } }[] }, ChatCompletion>,
  Accepts<{ tool_calls?: readonly { type: string }[] | null | undefined; function_call?: unknown }, ChatCompletionMessage>,
  Accepts<{ id: string; type: "function"; function: { name: string; arguments: string } }, ChatCompletionMessageFunctionToolCall>,
];

/**
 * Tool calls of a Chat Completion (choice `options.choice`, default 0) or of one assistant message: every
 * `function` tool call. Custom tool calls are the host's; the deprecated `function_call` has no id and is refused.
 */
export function parseChat(payload: unknown, options: ParseOptions = {}): ParseResult {
  const parsed = ChatPayload.safeParse(payload);
  if (!parsed.success) return malformed("OpenAI Chat Completions", parsed.error);
  const data: { choices?: { message: z.infer<typeof ChatMessage> }[] } & z.infer<typeof ChatMessage> = parsed.data;
  let message: z.infer<typeof ChatMessage>;
  let base = "";
  if (Array.isArray(data.choices)) {
    const index = options.choice ?? 0;
    const choice = data.choices[index];
    if (choice === undefined) return providerError("MALFORMED_PAYLOAD", `the completion has no choice ${index}`, "/choices");
    // The loose message branch of the union also admits `choices` whose entries are not choices at all.
    const held: unknown = (choice as { message?: unknown }).message;
    if (typeof held !== "object" || held === null) return providerError("MALFORMED_PAYLOAD", `choice ${index} has no message`, `/choices/${index}`);
    message = choice.message;
    base = `/choices/${index}/message`;
  } else message = data;
  const collector = new CallCollector(options);
  const calls = message.tool_calls ?? [];
  if (calls.length === 0 && message.function_call !== undefined && message.function_call !== null) {
    return providerError("MISSING_CALL_ID", "the deprecated function_call carries no call id; use tools", `${base}/function_call`);
  }
  for (const [i, raw] of calls.entries()) {
    if (raw.type !== "function") continue;
    const call = ChatToolCall.safeParse(raw);
    if (!call.success || call.data.function === undefined) {
      return call.success
        ? providerError("MALFORMED_PAYLOAD", "a function tool call without function", `${base}/tool_calls/${i}`)
        : malformed("OpenAI Chat Completions", call.error, `${base}/tool_calls/${i}`);
    }
    const error = collector.add(call.data.id, call.data.function.name, { text: call.data.function.arguments }, `${base}/tool_calls/${i}`);
    if (error) return error;
  }
  return collector.result();
}

/** `role: "tool"` messages answering every call under its `tool_call_id`, in the calls' order. */
export function formatChat(calls: readonly ParsedToolCall[], results: readonly CallResult[]): FormatResult<"openai-chat"> {
  const paired = pairResults(calls, results);
  if (!paired.ok) return paired;
  const output: OpenAIChatToolMessage[] = paired.pairs.map(([call, result, provenance]) => ({
    role: "tool",
    tool_call_id: call.id,
    content: observationText(result, provenance),
  }));
  return { ok: true, output };
}

/** Function tools for Chat Completions; strict where the schema allows (see {@link ExportOptions}). */
export function exportChat(contracts: readonly ToolContract[], options: ExportOptions): ExportResult<"openai-chat"> {
  const notes: ExportNote[] = [];
  const tools: ChatCompletionFunctionTool[] = contracts.map((contract) => {
    const { parameters, strict } = openAIParameters(contract, options, notes);
    return { type: "function", function: { name: contract.name, description: contract.description, parameters, strict } };
  });
  return { ok: true, tools, notes };
}

const ChatTool = z.looseObject({
  type: z.literal("function"),
  function: z.looseObject({ name: z.string().min(1), description: z.string().optional(), parameters: z.record(z.string(), z.unknown()).optional() }),
});
type _ChatToolRead = Accepts<
  { type: "function"; function: { name: string; description?: string | undefined; parameters?: Record<string, unknown> | undefined } },
  ChatCompletionFunctionTool
>;

/** Function tools of Chat Completions as the model-facing half of contracts (custom tools are skipped). */
export function importChat(definitions: unknown): DefinitionsResult {
  const list = z.array(z.looseObject({ type: z.string() })).safeParse(definitions);
  if (!list.success) return malformed("OpenAI Chat Completions tools", list.error);
  const tools: ProviderToolDefinition[] = [];
  for (const [i, raw] of list.data.entries()) {
    if (raw.type !== "function") continue;
    const tool = ChatTool.safeParse(raw);
    if (!tool.success) return malformed("OpenAI Chat Completions tools", tool.error, `/${i}`);
    const { name, description, parameters } = tool.data.function;
    tools.push({ name, description: description ?? "", input_schema: parameters ?? { type: "object", properties: {} } });
  }
  return { ok: true, tools };
}

// ---- shared -----------------------------------------------------------------------------------------------

function openAIParameters(contract: ToolContract, options: ExportOptions, notes: ExportNote[]): { parameters: Record<string, unknown>; strict: boolean } {
  if ((options.openaiStrict ?? "auto") === "auto") {
    const strict = toOpenAIStrict(contract.input_schema);
    if (strict.ok) {
      notes.push(...strict.dropped.map((d) => ({ tool: contract.name, ...d })));
      return { parameters: strict.schema, strict: true };
    }
    notes.push({ tool: contract.name, pointer: "", message: `sent non-strict: ${strict.reason}` });
  }
  return { parameters: contract.input_schema, strict: false };
}
