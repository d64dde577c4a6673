import Anthropic from "@anthropic-ai/sdk";
import { GoogleGenAI } from "@google/genai";
import type { ToolContractInput } from "@toolgate/registry";
import { exportTools, parseToolCalls, type ParsedToolCall, type ProviderName } from "@toolgate/providers";
import OpenAI from "openai";
import { z } from "zod";
import type { ModelAdapter, ModelResponse, ProposedToolCall, TranscriptItem } from "./model.js";

/** One configured model provider: which dialect it speaks, where, with which key (secret: never logged). */
export const ModelProviderSchema = z.object({
  /** The prefix runs use: model `openai:gpt-5` goes to the provider named `openai`. */
  name: z.string().regex(/^[a-z][a-z0-9-]{0,31}$/),
  kind: z.enum(["openai-responses", "openai-chat", "anthropic", "gemini"]),
  base_url: z.url().optional(),
  api_key: z.string().min(1),
  /** Anthropic requires an output bound per request. */
  max_tokens: z.number().int().min(1).max(200_000).default(4_096),
  timeout_ms: z.number().int().min(1_000).max(600_000).default(60_000),
});
export type ModelProvider = z.infer<typeof ModelProviderSchema>;

/** A provider answered something this adapter cannot read as a model turn. */
export class ModelResponseError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ModelResponseError";
  }
}

type ProviderKind = ModelProvider["kind"];

/** The contracts to offer the model, read at every request: a new version is offered from the next turn on. */
export type ContractSource = () => readonly ToolContractInput[];

/**
 * The transcript split into turns: the user's input, then per model turn its response and the observations
 * that answered its calls (their `content` is the wrapped, size-limited observation text).
 */
function turnsOf(transcript: readonly TranscriptItem[]): {
  user: string;
  turns: { response: ModelResponse; results: Extract<TranscriptItem, { role: "tool" }>[] }[];
} {
  let user = "";
  const turns: { response: ModelResponse; results: Extract<TranscriptItem, { role: "tool" }>[] }[] = [];
  for (const item of transcript) {
    if (item.role === "user") user = item.text;
    else if (item.role === "assistant") turns.push({ response: item.response, results: [] });
    else turns[turns.length - 1]?.results.push(item);
  }
  return { user, turns };
}

function toolCalls(calls: ParsedToolCall[]): ProposedToolCall[] {
  // Calls the adapter flagged (unknown tool, arguments not an object) are still proposed: policy answers them
  // under their own call id with the same codes, so the model can correct itself.
  return calls.map((c) => ({ id: c.id, name: c.name, arguments: c.argumentsJson }));
}

function parsed(kind: ProviderName, payload: unknown): ParsedToolCall[] {
  const result = parseToolCalls(kind, payload);
  if (!result.ok) throw new ModelResponseError(`${kind} response: ${result.error.code}: ${result.error.message}`);
  return result.calls;
}

function argumentsObject(text: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/** OpenAI Responses API: `function_call` output items in, `function_call_output` items back. */
function openAIResponses(client: OpenAI, model: string, contracts: ContractSource): ModelAdapter["respond"] {
  return async (transcript) => {
    const exported = exportTools("openai-responses", contracts());
    if (!exported.ok) throw new TypeError(exported.error.message);
    const { user, turns } = turnsOf(transcript);
    const input: OpenAI.Responses.ResponseInputItem[] = [{ role: "user", content: user }];
    for (const turn of turns) {
      if (turn.response.kind !== "tool_calls") continue;
      for (const c of turn.response.calls) input.push({ type: "function_call", call_id: c.id, name: c.name, arguments: c.arguments });
      for (const r of turn.results) input.push({ type: "function_call_output", call_id: r.call_id, output: r.content });
    }
    const response = await client.responses.create({ model, input, tools: exported.tools });
    const tokens = response.usage?.total_tokens ?? 0;
    const meta = { tokens, ...(response.model ? { modelVersion: response.model } : {}) };
    const calls = parsed("openai-responses", response);
    if (calls.length > 0) return { kind: "tool_calls", calls: toolCalls(calls), ...meta };
    const refusal = response.output.flatMap((o) => (o.type === "message" ? o.content : [])).find((c) => c.type === "refusal");
    if (refusal) return { kind: "refusal", text: refusal.refusal, ...meta };
    return { kind: "final", text: response.output_text, ...meta };
  };
}

/** OpenAI Chat Completions: assistant `tool_calls` in, `role: "tool"` messages back. */
function openAIChat(client: OpenAI, model: string, contracts: ContractSource): ModelAdapter["respond"] {
  return async (transcript) => {
    const exported = exportTools("openai-chat", contracts());
    if (!exported.ok) throw new TypeError(exported.error.message);
    const { user, turns } = turnsOf(transcript);
    const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: "user", content: user }];
    for (const turn of turns) {
      if (turn.response.kind !== "tool_calls") continue;
      messages.push({
        role: "assistant",
        content: turn.response.text ?? null,
        tool_calls: turn.response.calls.map((c) => ({ id: c.id, type: "function" as const, function: { name: c.name, arguments: c.arguments } })),
      });
      for (const r of turn.results) messages.push({ role: "tool", tool_call_id: r.call_id, content: r.content });
    }
    const completion = await client.chat.completions.create({ model, messages, tools: exported.tools });
    const tokens = completion.usage?.total_tokens ?? 0;
    const meta = { tokens, ...(completion.model ? { modelVersion: completion.model } : {}) };
    const calls = parsed("openai-chat", completion);
    if (calls.length > 0) return { kind: "tool_calls", calls: toolCalls(calls), ...meta };
    const message = completion.choices[0]?.message;
    if (!message) throw new ModelResponseError("chat completion without a choice");
    if (message.refusal) return { kind: "refusal", text: message.refusal, ...meta };
    return { kind: "final", text: message.content ?? "", ...meta };
  };
}

/** Anthropic Messages: `tool_use` blocks in, `tool_result` blocks (with `is_error`) back in one user turn. */
function anthropicMessages(client: Anthropic, model: string, maxTokens: number, contracts: ContractSource): ModelAdapter["respond"] {
  return async (transcript) => {
    const exported = exportTools("anthropic", contracts());
    if (!exported.ok) throw new TypeError(exported.error.message);
    const { user, turns } = turnsOf(transcript);
    const messages: Anthropic.MessageParam[] = [{ role: "user", content: user }];
    for (const turn of turns) {
      if (turn.response.kind !== "tool_calls") continue;
      messages.push({
        role: "assistant",
        content: [
          ...(turn.response.text ? [{ type: "text" as const, text: turn.response.text }] : []),
          ...turn.response.calls.map((c) => ({ type: "tool_use" as const, id: c.id, name: c.name, input: argumentsObject(c.arguments) })),
        ],
      });
      messages.push({
        role: "user",
        content: turn.results.map((r) => ({ type: "tool_result" as const, tool_use_id: r.call_id, content: r.content, is_error: !r.result.ok })),
      });
    }
    const message = await client.messages.create({ model, max_tokens: maxTokens, messages, tools: exported.tools });
    const tokens = message.usage.input_tokens + message.usage.output_tokens;
    const meta = { tokens, ...(message.model ? { modelVersion: message.model } : {}) };
    const calls = parsed("anthropic", message);
    if (calls.length > 0) return { kind: "tool_calls", calls: toolCalls(calls), ...meta };
    const text = message.content.flatMap((b) => (b.type === "text" ? [b.text] : [])).join("");
    if (message.stop_reason === "refusal") return { kind: "refusal", text, ...meta };
    return { kind: "final", text, ...meta };
  };
}

/** Gemini: `functionCall` parts in, `functionResponse` parts back. */
function gemini(client: GoogleGenAI, model: string, contracts: ContractSource): ModelAdapter["respond"] {
  return async (transcript) => {
    const exported = exportTools("gemini", contracts());
    if (!exported.ok) throw new TypeError(exported.error.message);
    const { user, turns } = turnsOf(transcript);
    const contents: { role: "user" | "model"; parts: Record<string, unknown>[] }[] = [{ role: "user", parts: [{ text: user }] }];
    for (const turn of turns) {
      if (turn.response.kind !== "tool_calls") continue;
      contents.push({
        role: "model",
        parts: turn.response.calls.map((c) => ({ functionCall: { id: c.id, name: c.name, args: argumentsObject(c.arguments) } })),
      });
      contents.push({
        role: "user",
        parts: turn.results.map((r) => ({ functionResponse: { id: r.call_id, name: r.name, response: JSON.parse(r.content) as Record<string, unknown> } })),
      });
    }
    const response = await client.models.generateContent({ model, contents, config: { tools: [{ functionDeclarations: exported.tools }] } });
    const tokens = response.usageMetadata?.totalTokenCount ?? 0;
    const meta = { tokens, ...(response.modelVersion ? { modelVersion: response.modelVersion } : {}) };
    const calls = parsed("gemini", response);
    if (calls.length > 0) return { kind: "tool_calls", calls: toolCalls(calls), ...meta };
    const finish = String(response.candidates?.[0]?.finishReason ?? "");
    if (finish === "SAFETY" || finish === "PROHIBITED_CONTENT") return { kind: "refusal", text: response.text ?? "", ...meta };
    return { kind: "final", text: response.text ?? "", ...meta };
  };
}

/**
 * A model adapter that calls a provider through its official SDK, offering the current contracts as tools
 * in that provider's format. SDK and network errors propagate: the run loop stops the run with `model_error`.
 */
export function providerModel(provider: ModelProvider, model: string, contracts: ContractSource): ModelAdapter {
  const name = `${provider.name}:${model}`;
  const base = provider.base_url;
  const kind: ProviderKind = provider.kind;
  let respond: ModelAdapter["respond"];
  switch (kind) {
    case "openai-responses":
    case "openai-chat": {
      const client = new OpenAI({ apiKey: provider.api_key, ...(base ? { baseURL: base } : {}), timeout: provider.timeout_ms, maxRetries: 1 });
      respond = kind === "openai-responses" ? openAIResponses(client, model, contracts) : openAIChat(client, model, contracts);
      break;
    }
    case "anthropic": {
      const client = new Anthropic({ apiKey: provider.api_key, ...(base ? { baseURL: base } : {}), timeout: provider.timeout_ms, maxRetries: 1 });
      respond = anthropicMessages(client, model, provider.max_tokens, contracts);
      break;
    }
    case "gemini": {
      const client = new GoogleGenAI({ apiKey: provider.api_key, httpOptions: { ...(base ? { baseUrl: base } : {}), timeout: provider.timeout_ms } });
      respond = gemini(client, model, contracts);
      break;
    }
  }
  return { name, respond };
}
