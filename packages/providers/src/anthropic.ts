import type { ToolContract } from "@toolgate/registry";
import { z } from "zod";
import { CallCollector, malformed, observationText, pairResults } from "./calls.js";
import type { Accepts, AnthropicMessage, AnthropicMessageParam, AnthropicTool, ToolResultBlockParam, ToolUseBlock } from "./sdk-types.js";
import type { CallResult, ExportResult, FormatResult, ProviderToolDefinition, DefinitionsResult, ParsedToolCall, ParseOptions, ParseResult } from "./types.js";

const Block = z.looseObject({ type: z.string() });
const ToolUse = z.looseObject({ type: z.literal("tool_use"), id: z.unknown(), name: z.unknown(), input: z.unknown() });
const MessagesPayload = z.union([z.looseObject({ content: z.array(Block) }), z.array(Block)]);

type _MessagesRead = [
  Accepts<{ content: readonly { type: string }[] }, AnthropicMessage>,
  Accepts<{ content: string | readonly { type: string }[] }, AnthropicMessageParam>,
  Accepts<{ type: "tool_use"; id: string; name: string; input: unknown }, ToolUseBlock>,
];

/**
 * Tool calls of a Messages API response (or an assistant message, or its content blocks): every `tool_use`
 * block. Server tool blocks are run by Anthropic and left alone. `input` must be a JSON object.
 */
export function parseAnthropic(payload: unknown, options: ParseOptions = {}): ParseResult {
  const parsed = MessagesPayload.safeParse(payload);
  if (!parsed.success) return malformed("Anthropic Messages", parsed.error);
  const blocks = Array.isArray(parsed.data) ? parsed.data : parsed.data.content;
  const base = Array.isArray(parsed.data) ? "" : "/content";
  const collector = new CallCollector(options);
  for (const [i, raw] of blocks.entries()) {
    if (raw.type !== "tool_use") continue;
    const block = ToolUse.safeParse(raw);
    if (!block.success) return malformed("Anthropic Messages", block.error, `${base}/${i}`);
    const error = collector.add(block.data.id, block.data.name, { object: block.data.input }, `${base}/${i}`);
    if (error) return error;
  }
  return collector.result();
}

/**
 * `tool_result` blocks answering every `tool_use` by its id, in the calls' order, `is_error` set on failures.
 * They go first in the next user message, before any text.
 */
export function formatAnthropic(calls: readonly ParsedToolCall[], results: readonly CallResult[]): FormatResult<"anthropic"> {
  const paired = pairResults(calls, results);
  if (!paired.ok) return paired;
  const output: ToolResultBlockParam[] = paired.pairs.map(([call, result, provenance]) => ({
    type: "tool_result",
    tool_use_id: call.id,
    content: observationText(result, provenance),
    is_error: !result.ok,
  }));
  return { ok: true, output };
}

/** Client tools for the Messages API, with the full input schema (Anthropic takes JSON Schema as written). */
export function exportAnthropic(contracts: readonly ToolContract[]): ExportResult<"anthropic"> {
  const tools: AnthropicTool[] = contracts.map((contract) => ({
    name: contract.name,
    description: contract.description,
    input_schema: { ...contract.input_schema, type: "object" },
  }));
  return { ok: true, tools, notes: [] };
}

const ClientTool = z.looseObject({
  name: z.string().min(1),
  description: z.string().optional(),
  input_schema: z.looseObject({ type: z.literal("object") }),
  type: z.union([z.literal("custom"), z.null()]).optional(),
});
type _ToolRead = Accepts<
  { name: string; description?: string | undefined; input_schema: { type: "object" }; type?: "custom" | null | undefined },
  AnthropicTool
>;

/** Client (custom) tools as the model-facing half of contracts; server tools (web search, bash…) are skipped. */
export function importAnthropic(definitions: unknown): DefinitionsResult {
  const list = z.array(z.looseObject({ type: z.unknown().optional() })).safeParse(definitions);
  if (!list.success) return malformed("Anthropic tools", list.error);
  const tools: ProviderToolDefinition[] = [];
  for (const [i, raw] of list.data.entries()) {
    if (raw.type !== undefined && raw.type !== null && raw.type !== "custom") continue;
    const tool = ClientTool.safeParse(raw);
    if (!tool.success) return malformed("Anthropic tools", tool.error, `/${i}`);
    tools.push({ name: tool.data.name, description: tool.data.description ?? "", input_schema: tool.data.input_schema });
  }
  return { ok: true, tools };
}
