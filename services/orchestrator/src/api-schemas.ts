import {
  CallIdSchema,
  FailureResultSchema,
  RunContextSchema,
  RunIdSchema,
  SuccessResultSchema,
  TERMINAL_CALL_EVENT_TYPES,
  ToolErrorSchema,
} from "@toolgate/contracts";
import { PROVIDERS } from "@toolgate/providers";
import { z } from "zod";
import { BudgetsSchema } from "./budgets.js";

/**
 * The schemas named in the OpenAPI document's `components` (input schemas get the suffix `Input`). A schema
 * not registered here is inlined where it is used.
 */
export const apiComponents = z.registry<{ id: string; description?: string }>();

const named = <T extends z.ZodType>(schema: T, id: string, description?: string): T => {
  apiComponents.add(schema, { id, ...(description === undefined ? {} : { description }) });
  return schema;
};

/** Body of `POST /v1/runs`: a managed run. */
export const StartRunSchema = named(
  z.object({
    model: z.string().min(1).max(128),
    input: z
      .string()
      .max(64 * 1024)
      .default(""),
    context: RunContextSchema.default({}),
    /** Tighter budgets for this run; the server's budgets are the ceiling. */
    budgets: BudgetsSchema.partial().default({}),
  }),
  "StartRun",
);

/** Body of `POST /v1/tool-calls`: bring-your-own-loop. */
export const SubmitCallsSchema = named(
  z.object({
    run_id: RunIdSchema.optional(),
    context: RunContextSchema.default({}),
    calls: z
      .array(
        z.object({
          id: z.string().min(1).max(256),
          name: z.string().max(256),
          // Providers send either a JSON text (OpenAI) or an object (Anthropic, Gemini): both become text here,
          // and policy parses it, so INVALID_JSON is reported in one place.
          arguments: z.union([z.string(), z.record(z.string(), z.unknown())]).transform((a) => (typeof a === "string" ? a : JSON.stringify(a))),
        }),
      )
      .min(1)
      .max(64),
    wait_ms: z.number().int().min(0).max(60_000).default(0),
  }),
  "SubmitCalls",
);

/** How long a read may wait for a change. */
const WaitMsSchema = z.coerce.number().int().min(0).max(60_000).default(0);

/** Query of reads that may wait for a change. */
export const WaitQuerySchema = z.object({ wait_ms: WaitMsSchema });

/** Body of `POST /v1/providers/{provider}/tool-calls`: a provider-native model response, bring-your-own-loop. */
export const SubmitProviderResponseSchema = named(
  z.object({
    run_id: RunIdSchema.optional(),
    context: RunContextSchema.default({}),
    /** The model's output exactly as the provider returned it (a Responses object, a chat completion, a message…). */
    response: z.unknown(),
    wait_ms: z.number().int().min(0).max(60_000).default(0),
  }),
  "SubmitProviderResponse",
);

export const RunParamsSchema = z.object({ run_id: RunIdSchema });
export const CallParamsSchema = z.object({ call_id: CallIdSchema });
export const ProviderParamsSchema = z.object({ provider: z.enum(PROVIDERS) });
export const ToolsQuerySchema = z.object({ format: z.enum(PROVIDERS).optional() });
export const ProviderResultsQuerySchema = z.object({
  call_ids: z
    .string()
    .describe("1 to 64 call ids of one run, comma-separated")
    .transform((ids) => ids.split(",").filter(Boolean))
    .pipe(z.array(CallIdSchema).min(1).max(64)),
  wait_ms: WaitMsSchema,
});

/**
 * The `Idempotency-Key` header of requests that create work. Checked again (structured-field form included) by
 * `parseIdempotencyKey`, which says why a key is refused.
 */
export const IdempotencyHeadersSchema = z.looseObject({
  "idempotency-key": z
    .string()
    .regex(/^"?[\x21\x23-\x5B\x5D-\x7E]{1,255}"?$/)
    .optional()
    .describe(
      "A client key (1-255 visible ASCII characters other than '\"' and '\\', bare or as a structured-field string), scoped to the authenticated principal and kept 24 h (ORCHESTRATOR_IDEMPOTENCY_RETENTION_MS). The same key with the same route and body (wait_ms aside) answers with the original response, or for calls their current state, marked Idempotent-Replayed: true; without it the request is not deduplicated.",
    ),
});

// Responses. Tool data and error details are any JSON value: described, not traversed, when a response is
// checked (a response body is JSON by construction, and a tool's data can be large).
const AnyJson = z.unknown().describe("any JSON value");

/** The API's error body: a stable code, a message for people, and details that depend on the code. */
export const ErrorBodySchema = named(
  z.object({
    error: z.object({
      code: z.string().describe("a stable code to branch on, e.g. INVALID_REQUEST, RUN_NOT_FOUND, UNAVAILABLE"),
      message: z.string(),
      details: AnyJson.optional(),
    }),
  }),
  "Error",
);

/** A call's terminal result as the API returns it (the contracts' result envelope). */
export const ResultEnvelopeWireSchema = named(
  z.discriminatedUnion("ok", [
    SuccessResultSchema.extend({ data: AnyJson }),
    FailureResultSchema.extend({ error: ToolErrorSchema.extend({ details: z.record(z.string(), AnyJson).optional() }) }),
  ]),
  "ResultEnvelope",
);

const CallStatusSchema = z.enum(["pending", ...TERMINAL_CALL_EVENT_TYPES]).describe("pending, or the terminal event that ended the call");

/** One call as `GET /v1/tool-calls/{call_id}` answers it. */
export const CallViewSchema = named(
  z.object({
    call_id: CallIdSchema,
    run_id: RunIdSchema,
    provider_call_id: z.string(),
    tool: z.string(),
    status: CallStatusSchema,
    result: ResultEnvelopeWireSchema.optional(),
  }),
  "CallView",
);

/** A run with every call and its result. */
export const RunViewSchema = named(
  z.object({
    run_id: RunIdSchema,
    status: z.enum(["running", "completed", "stopped", "external"]),
    model: z.string(),
    turn: z.number().int(),
    tool_calls: z.number().int(),
    budgets: BudgetsSchema.partial(),
    usage: z.object({ turns: z.number().int(), tool_calls: z.number().int(), tokens: z.number() }),
    final_text: z.string().optional(),
    stop_reason: z.string().optional(),
    calls: z.array(
      z.object({
        call_id: CallIdSchema,
        provider_call_id: z.string(),
        tool: z.string(),
        turn: z.number().int(),
        status: CallStatusSchema,
        result: ResultEnvelopeWireSchema.optional(),
      }),
    ),
  }),
  "RunView",
);

export const RunStartedSchema = z.object({ run_id: RunIdSchema });

/** What `POST /v1/tool-calls` answers: each call under the host's id, with its result once it ended. */
export const SubmittedCallsSchema = named(
  z.object({
    run_id: RunIdSchema,
    results: z.array(
      z.object({
        id: z.string(),
        call_id: CallIdSchema,
        status: z.enum(["done", "pending"]),
        result: ResultEnvelopeWireSchema.optional(),
      }),
    ),
  }),
  "SubmittedCalls",
);

const CallMappingSchema = z.array(z.object({ id: z.string().describe("the provider's call id"), call_id: CallIdSchema }));

/** Every call ended: the tool results in the provider's own format. */
export const ProviderResultsSchema = named(
  z.object({
    run_id: RunIdSchema,
    complete: z.literal(true),
    calls: CallMappingSchema,
    results: AnyJson.describe("the tool results as the provider's API expects them in the next request"),
  }),
  "ProviderResults",
);

/** Some calls are still running or wait for a person's approval. */
export const ProviderPendingSchema = named(
  z.object({
    run_id: RunIdSchema,
    complete: z.literal(false),
    calls: CallMappingSchema,
    pending: z.array(z.object({ id: z.string(), call_id: CallIdSchema, status: z.enum(["running", "awaiting_approval"]) })),
  }),
  "ProviderPending",
);

/** `GET /v1/tools`: the registry as Toolgate enforces it, or (with `format`) in a provider's tool format. */
export const ToolsSchema = z.union([
  z.object({
    tools: z.array(
      z.object({
        name: z.string(),
        version: z.string(),
        hash: z.string(),
        description: z.string(),
        input_schema: z.union([z.boolean(), z.record(z.string(), z.unknown())]).describe("the JSON Schema the arguments must satisfy, unknown fields refused"),
        output_schema: AnyJson.optional(),
        side_effect: z.string(),
        risk: z.string(),
        untrusted_output: z.boolean(),
      }),
    ),
  }),
  z.object({ format: z.enum(PROVIDERS), tools: z.array(AnyJson), notes: AnyJson }),
]);

export const HealthSchema = z.object({ ok: z.literal(true) });
export const ReadySchema = z.object({ ready: z.literal(true) });
export const NotReadySchema = z.object({
  ready: z.literal(false),
  unavailable: z.array(z.enum(["nats", "mongo"])),
  waiting: z.number().int().min(0).describe("requests waiting for the dependencies to come back"),
});

/** A JSON-RPC error as the MCP transport answers a request it cannot take (no session, wrong headers, bad JSON). */
export const JsonRpcErrorSchema = named(
  z.object({
    jsonrpc: z.literal("2.0"),
    error: z.object({ code: z.number().int(), message: z.string(), data: AnyJson.optional() }),
    id: z.union([z.string(), z.number(), z.null()]),
  }),
  "JsonRpcError",
);

export const ResourceMetadataSchema = named(
  z.object({
    resource: z.string(),
    authorization_servers: z.array(z.string()),
    bearer_methods_supported: z.array(z.literal("header")),
    resource_name: z.string(),
  }),
  "ProtectedResourceMetadata",
);
