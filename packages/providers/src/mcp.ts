import type { JsonValue } from "@toolgate/contracts";
import { effectHints, type ToolContract } from "@toolgate/registry";
import { z } from "zod";
import { CallCollector, malformed, observation, pairResults, provenanceNote, providerError } from "./calls.js";
import type { Accepts, CallToolResult, ListToolsResult, McpTool, McpToolCallRequest, McpToolCallResponse } from "./sdk-types.js";
import type {
  CallResult,
  ExportResult,
  FormatResult,
  ProviderToolDefinition,
  DefinitionsResult,
  ParsedToolCall,
  ParseOptions,
  ParseResult,
  Provenance,
  ToolHints,
} from "./types.js";

const Request = z.looseObject({
  jsonrpc: z.literal("2.0"),
  id: z.union([z.string(), z.number()]).optional(),
  method: z.string(),
  params: z.looseObject({ name: z.unknown(), arguments: z.unknown().optional() }).optional(),
});
const McpPayload = z.union([Request, z.array(Request).min(1)]);

type _RequestRead = Accepts<
  { jsonrpc: "2.0"; id: string | number; method: "tools/call"; params: { name: string; arguments?: Record<string, unknown> | undefined } },
  McpToolCallRequest
>;

/**
 * Tool calls of MCP `tools/call` requests (one JSON-RPC request, or a list). The request id is the call id and
 * is answered with its own JSON type. Any other method, or a request without an id, is refused.
 */
export function parseMcp(payload: unknown, options: ParseOptions = {}): ParseResult {
  const parsed = McpPayload.safeParse(payload);
  if (!parsed.success) return malformed("MCP", parsed.error);
  const requests = Array.isArray(parsed.data) ? parsed.data : [parsed.data];
  const collector = new CallCollector(options);
  for (const [i, request] of requests.entries()) {
    const pointer = Array.isArray(parsed.data) ? `/${i}` : "";
    if (request.method !== "tools/call")
      return providerError("UNSUPPORTED_MESSAGE", `${JSON.stringify(request.method.slice(0, 64))} is not tools/call`, `${pointer}/method`);
    if (request.id === undefined) return providerError("MISSING_CALL_ID", "a tools/call request needs an id to be answered", pointer);
    if (typeof request.id === "number" && !Number.isSafeInteger(request.id))
      return providerError("MALFORMED_PAYLOAD", "a numeric request id must be an integer", `${pointer}/id`);
    const args = request.params?.arguments;
    const error = collector.add(String(request.id), request.params?.name, { object: args === undefined ? {} : args }, `${pointer}/params`, {
      jsonrpcId: request.id,
    });
    if (error) return error;
  }
  return collector.result();
}

/**
 * JSON-RPC responses carrying a `CallToolResult` for every request, under its own id: a success has the data as
 * `structuredContent` (when it is an object) and as JSON text; a failure has `isError` and the typed error as text.
 */
export function formatMcp(calls: readonly ParsedToolCall[], results: readonly CallResult[]): FormatResult<"mcp"> {
  const paired = pairResults(calls, results);
  if (!paired.ok) return paired;
  const output: McpToolCallResponse[] = paired.pairs.map(([call, result, provenance]) => {
    const id = call.origin !== undefined && "jsonrpcId" in call.origin ? call.origin.jsonrpcId : call.id;
    let answer: CallToolResult;
    if (result.ok) {
      const { ok: _ok, data, ...flags } = observation(result);
      answer = {
        content: [{ type: "text", text: JSON.stringify(data ?? null) }],
        ...(isRecord(data) ? { structuredContent: data } : {}),
        isError: false,
        ...(Object.keys(flags).length > 0 || provenance
          ? { _meta: { ...(Object.keys(flags).length > 0 ? { "io.toolgate/result": flags } : {}), ...meta(provenance) } }
          : {}),
      };
    } else {
      answer = { content: [{ type: "text", text: JSON.stringify(observation(result)) }], isError: true, ...(provenance ? { _meta: meta(provenance) } : {}) };
    }
    return { jsonrpc: "2.0", id, result: answer };
  });
  return { ok: true, output };
}

/** Provenance travels in `_meta`: `structuredContent` must keep matching the tool's output schema. */
function meta(provenance: Provenance | undefined): Record<string, unknown> {
  return provenance ? { "io.toolgate/provenance": { ...provenance, note: provenanceNote(provenance) } } : {};
}

function isRecord(value: JsonValue | undefined): value is { [key: string]: JsonValue } {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** MCP tool definitions, with the output schema and annotations derived from the contract's runtime half. */
export function exportMcp(contracts: readonly ToolContract[]): ExportResult<"mcp"> {
  const tools: McpTool[] = contracts.map((contract) => {
    const hints = effectHints(contract);
    return {
      name: contract.name,
      description: contract.description,
      inputSchema: { ...contract.input_schema, type: "object" },
      ...(contract.output_schema.type === "object" ? { outputSchema: { ...contract.output_schema, type: "object" } } : {}),
      annotations: {
        readOnlyHint: hints.readOnly,
        destructiveHint: hints.destructive,
        idempotentHint: hints.idempotent,
        openWorldHint: hints.openWorld,
      },
    };
  });
  return { ok: true, tools, notes: [] };
}

const ToolShape = z.looseObject({
  name: z.string().min(1),
  description: z.string().optional(),
  inputSchema: z.looseObject({ type: z.literal("object") }),
  outputSchema: z.looseObject({ type: z.literal("object") }).optional(),
  annotations: z
    .looseObject({
      readOnlyHint: z.boolean().optional(),
      destructiveHint: z.boolean().optional(),
      idempotentHint: z.boolean().optional(),
      openWorldHint: z.boolean().optional(),
    })
    .optional(),
});
type _ToolRead = [
  Accepts<
    {
      name: string;
      description?: string | undefined;
      inputSchema: { type: "object" };
      outputSchema?: { type: "object" } | undefined;
      annotations?:
        | {
            readOnlyHint?: boolean | undefined;
            destructiveHint?: boolean | undefined;
            idempotentHint?: boolean | undefined;
            openWorldHint?: boolean | undefined;
          }
        | undefined;
    },
    McpTool
  >,
  Accepts<{ tools: readonly McpTool[] }, ListToolsResult>,
];

/** An MCP server's tools (a `tools/list` result or its `tools`) as the model-facing half of contracts, with hints. */
export function importMcp(definitions: unknown): DefinitionsResult {
  const list = z.union([z.looseObject({ tools: z.array(z.unknown()) }), z.array(z.unknown())]).safeParse(definitions);
  if (!list.success) return malformed("MCP tools", list.error);
  const items = Array.isArray(list.data) ? list.data : list.data.tools;
  const tools: ProviderToolDefinition[] = [];
  for (const [i, raw] of items.entries()) {
    const tool = ToolShape.safeParse(raw);
    if (!tool.success) return malformed("MCP tools", tool.error, Array.isArray(list.data) ? `/${i}` : `/tools/${i}`);
    const { name, description, inputSchema, outputSchema, annotations } = tool.data;
    const hints: ToolHints = {
      ...(annotations?.readOnlyHint === undefined ? {} : { readOnly: annotations.readOnlyHint }),
      ...(annotations?.destructiveHint === undefined ? {} : { destructive: annotations.destructiveHint }),
      ...(annotations?.idempotentHint === undefined ? {} : { idempotent: annotations.idempotentHint }),
      ...(annotations?.openWorldHint === undefined ? {} : { openWorld: annotations.openWorldHint }),
    };
    tools.push({
      name,
      description: description ?? "",
      input_schema: inputSchema,
      ...(outputSchema ? { output_schema: outputSchema } : {}),
      ...(Object.keys(hints).length > 0 ? { hints } : {}),
    });
  }
  return { ok: true, tools };
}
