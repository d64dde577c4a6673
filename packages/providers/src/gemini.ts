import type { ToolContract } from "@toolgate/registry";
import { z } from "zod";
import { CallCollector, malformed, observation, pairResults, provenanceNote, providerError } from "./calls.js";
import { fromGeminiSchema, toGeminiSchema } from "./schema-dialects.js";
import type { Accepts, Content, FunctionDeclaration, GeminiResponse, GeminiTool, Part, Schema } from "./sdk-types.js";
import type {
  CallResult,
  ExportNote,
  ExportResult,
  FormatResult,
  ProviderToolDefinition,
  DefinitionsResult,
  ParsedToolCall,
  ParseOptions,
  ParseResult,
} from "./types.js";

const PartShape = z.looseObject({ functionCall: z.looseObject({ id: z.unknown(), name: z.unknown(), args: z.unknown() }).optional() });
const ContentShape = z.looseObject({ parts: z.array(PartShape).optional() });
const GeminiPayload = z.union([z.looseObject({ candidates: z.array(z.looseObject({ content: ContentShape.optional() })).min(1) }), ContentShape]);

type _GeminiRead = [
  Accepts<{ candidates?: readonly { content?: { parts?: readonly Part[] | undefined } | undefined }[] | undefined }, GeminiResponse>,
  Accepts<
    {
      parts?:
        | readonly { functionCall?: { id?: string | undefined; name?: string | undefined; args?: Record<string, unknown> | undefined } | undefined }[]
        | undefined;
    },
    Content
  >,
];

/** Prefix of the ids given to calls the model sent without one (Gemini's ids are optional). */
const GENERATED_ID_PREFIX = "gemini_call_";

/**
 * Tool calls of a Gemini response (its first candidate) or of one model `Content`: every `functionCall` part.
 * Gemini's call id is optional: a call without one gets `gemini_call_<n>` (n = its position) and is answered
 * without an id, in order, as Gemini expects. Missing `args` means no arguments (`{}`).
 */
export function parseGemini(payload: unknown, options: ParseOptions = {}): ParseResult {
  const parsed = GeminiPayload.safeParse(payload);
  if (!parsed.success) return malformed("Gemini", parsed.error);
  const data: { candidates?: { content?: z.infer<typeof ContentShape> | undefined }[] } & z.infer<typeof ContentShape> = parsed.data;
  const content = Array.isArray(data.candidates) ? data.candidates[0]?.content : data;
  const base = "candidates" in parsed.data ? "/candidates/0/content/parts" : "/parts";
  const parts = content?.parts ?? [];
  const collector = new CallCollector(options);
  const given = new Set(parts.map((p) => p.functionCall?.id).filter((id): id is string => typeof id === "string"));
  for (const [i, part] of parts.entries()) {
    const call = part.functionCall;
    if (call === undefined) continue;
    let id: unknown = call.id;
    let origin: ParsedToolCall["origin"];
    if (id === undefined || id === null) {
      const generated = `${GENERATED_ID_PREFIX}${i}`;
      id = generated;
      if (given.has(generated)) return providerError("DUPLICATE_CALL_ID", `the generated id ${generated} is also a call id the model sent`, `${base}/${i}`);
      origin = { generatedId: true };
    }
    const args = call.args === undefined || call.args === null ? {} : call.args;
    const error = collector.add(id, call.name, { object: args }, `${base}/${i}/functionCall`, origin);
    if (error) return error;
  }
  return collector.result();
}

/**
 * `functionResponse` parts answering every call, in the calls' order: `response.output` carries the data of a
 * success and `response.error` the typed error of a failure (Gemini's convention). A call that came with an id
 * is answered with it.
 */
export function formatGemini(calls: readonly ParsedToolCall[], results: readonly CallResult[]): FormatResult<"gemini"> {
  const paired = pairResults(calls, results);
  if (!paired.ok) return paired;
  const output: Part[] = paired.pairs.map(([call, result, provenance]) => {
    const { ok: _ok, data, error, ...rest } = observation(result);
    const wrapped = provenance ? { toolgate_observation: { ...provenance, note: provenanceNote(provenance) } } : {};
    const response = result.ok ? { output: data ?? null, ...rest, ...wrapped } : { error: { ...(error as Record<string, unknown>), ...rest }, ...wrapped };
    const generated = call.origin !== undefined && "generatedId" in call.origin;
    return { functionResponse: { ...(generated ? {} : { id: call.id }), name: call.name, response } };
  });
  return { ok: true, output };
}

/** Function declarations in Gemini's schema subset; what the subset cannot say is listed in the notes. */
export function exportGemini(contracts: readonly ToolContract[]): ExportResult<"gemini"> {
  const notes: ExportNote[] = [];
  const tools: FunctionDeclaration[] = [];
  for (const contract of contracts) {
    const converted = toGeminiSchema(contract.input_schema);
    if (!converted.ok) return providerError("INVALID_CONTRACT", `${contract.name} has no Gemini schema: ${converted.reason}`);
    notes.push(...converted.dropped.map((d) => ({ tool: contract.name, ...d })));
    tools.push({ name: contract.name, description: contract.description, parameters: converted.schema });
  }
  return { ok: true, tools, notes };
}

const GeminiSchemaShape: z.ZodType<Schema> = z.lazy(() =>
  z.looseObject({
    type: z.string().optional(),
    description: z.string().optional(),
    title: z.string().optional(),
    format: z.string().optional(),
    pattern: z.string().optional(),
    nullable: z.boolean().optional(),
    enum: z.array(z.string()).optional(),
    minimum: z.number().optional(),
    maximum: z.number().optional(),
    minLength: z.string().optional(),
    maxLength: z.string().optional(),
    minItems: z.string().optional(),
    maxItems: z.string().optional(),
    minProperties: z.string().optional(),
    maxProperties: z.string().optional(),
    required: z.array(z.string()).optional(),
    properties: z.record(z.string(), GeminiSchemaShape).optional(),
    items: GeminiSchemaShape.optional(),
    anyOf: z.array(GeminiSchemaShape).optional(),
  }),
) as z.ZodType<Schema>;
const Declaration = z.looseObject({
  name: z.string().min(1),
  description: z.string().optional(),
  parameters: GeminiSchemaShape.optional(),
  parametersJsonSchema: z.record(z.string(), z.unknown()).optional(),
  responseJsonSchema: z.record(z.string(), z.unknown()).optional(),
});
type _DeclarationRead = Accepts<
  { name?: string | undefined; description?: string | undefined; parameters?: Schema | undefined; parametersJsonSchema?: unknown },
  FunctionDeclaration
>;

/** Function declarations (a list, or `Tool`s with `functionDeclarations`) as the model-facing half of contracts. */
export function importGemini(definitions: unknown): DefinitionsResult {
  const list = z.array(z.looseObject({ functionDeclarations: z.array(z.unknown()).optional() })).safeParse(definitions);
  if (!list.success) return malformed("Gemini tools", list.error);
  const declarations: { value: unknown; pointer: string }[] = [];
  for (const [i, item] of list.data.entries()) {
    if (item.functionDeclarations !== undefined)
      declarations.push(...item.functionDeclarations.map((value, j) => ({ value, pointer: `/${i}/functionDeclarations/${j}` })));
    else if ("name" in item) declarations.push({ value: item, pointer: `/${i}` });
  }
  const tools: ProviderToolDefinition[] = [];
  for (const { value, pointer } of declarations) {
    const declaration = Declaration.safeParse(value);
    if (!declaration.success) return malformed("Gemini tools", declaration.error, pointer);
    const { name, description, parameters, parametersJsonSchema, responseJsonSchema } = declaration.data;
    const input = parametersJsonSchema ?? (parameters === undefined ? { type: "object", properties: {} } : fromGeminiSchema(parameters));
    tools.push({ name, description: description ?? "", input_schema: input, ...(responseJsonSchema ? { output_schema: responseJsonSchema } : {}) });
  }
  return { ok: true, tools };
}

type _ToolsRead = Accepts<{ functionDeclarations?: readonly FunctionDeclaration[] | undefined }, GeminiTool>;
