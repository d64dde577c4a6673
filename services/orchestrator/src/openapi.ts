import { ERROR_CODES, ResultEnvelopeSchema } from "@toolgate/contracts";
import { z } from "zod";
import { PROVIDERS } from "@toolgate/providers";
import { StartRunSchema, SubmitCallsSchema, SubmitProviderResponseSchema } from "./api-schemas.js";

const json = (schema: z.ZodType, io: "input" | "output" = "input") => z.toJSONSchema(schema, { io, unrepresentable: "any" });

const ErrorSchema = {
  type: "object",
  required: ["error"],
  properties: {
    error: {
      type: "object",
      required: ["code", "message"],
      properties: { code: { type: "string" }, message: { type: "string" }, details: {} },
    },
  },
};

const RunViewSchema = {
  type: "object",
  required: ["run_id", "status", "model", "turn", "calls"],
  properties: {
    run_id: { type: "string" },
    status: { enum: ["running", "completed", "stopped", "external"] },
    stop_reason: { type: "string" },
    final_text: { type: "string" },
    turn: { type: "integer" },
    budgets: { type: "object" },
    usage: { type: "object" },
    calls: {
      type: "array",
      items: {
        type: "object",
        properties: {
          call_id: { type: "string" },
          provider_call_id: { type: "string" },
          tool: { type: "string" },
          turn: { type: "integer" },
          status: { type: "string", description: "pending, or the terminal event: rejected, denied, completed, outcome_unknown" },
          result: { $ref: "#/components/schemas/ResultEnvelope" },
        },
      },
    },
  },
};

const errors = { "400": ref("Error", "invalid request"), "401": ref("Error", "missing or unknown API key") };

const IdempotencyKeyHeader = {
  name: "Idempotency-Key",
  in: "header",
  required: false,
  description:
    "A client key (1-255 visible ASCII characters other than '\"' and '\\', bare or as a structured-field string), scoped to the authenticated principal and kept 24 h (ORCHESTRATOR_IDEMPOTENCY_RETENTION_MS). The same key with the same route and body (wait_ms aside) answers with the original response, or for calls their current state, marked Idempotent-Replayed: true; without it the request is not deduplicated.",
  schema: { type: "string", minLength: 1, maxLength: 255, pattern: '^"?[\\x21\\x23-\\x5B\\x5D-\\x7E]{1,255}"?$' },
};

/** The answers every endpoint that creates work may give besides its own. */
const workErrors = {
  ...errors,
  "400": ref("Error", "invalid request, or a malformed Idempotency-Key (INVALID_IDEMPOTENCY_KEY)"),
  "409": ref("Error", "IDEMPOTENCY_KEY_IN_FLIGHT: the first request with this key is still creating its work; retry after Retry-After seconds"),
  "422": ref(
    "Error",
    "IDEMPOTENCY_KEY_REUSED: the key was used for another request; PROVIDER_CALL_ID_CONFLICT: a provider call id of this run was used for another tool or other arguments",
  ),
  "503": ref(
    "Error",
    "UNAVAILABLE: NATS or the database is unavailable (answered within ORCHESTRATOR_UNAVAILABLE_AFTER_MS); retry after Retry-After seconds, with the same Idempotency-Key",
  ),
};

function ref(name: string, description: string) {
  return { description, content: { "application/json": { schema: { $ref: `#/components/schemas/${name}` } } } };
}

/** The orchestrator's public API as OpenAPI 3.1, built from the same zod schemas that validate requests. */
export function openApiDocument(): Record<string, unknown> {
  return {
    openapi: "3.1.0",
    info: {
      title: "Toolgate orchestrator API",
      version: "1",
      description: `Managed runs and bring-your-own-loop tool calls. Result error codes: ${Object.keys(ERROR_CODES).join(", ")}.`,
    },
    components: {
      securitySchemes: { apiKey: { type: "http", scheme: "bearer" } },
      schemas: {
        StartRun: json(StartRunSchema),
        SubmitCalls: json(SubmitCallsSchema),
        SubmitProviderResponse: json(SubmitProviderResponseSchema),
        ResultEnvelope: json(ResultEnvelopeSchema, "output"),
        RunView: RunViewSchema,
        Error: ErrorSchema,
      },
    },
    security: [{ apiKey: [] }],
    paths: {
      "/v1/runs": {
        post: {
          summary: "Start a managed run: Toolgate drives the model and the tool loop within the run's budgets.",
          parameters: [IdempotencyKeyHeader],
          requestBody: { required: true, content: { "application/json": { schema: { $ref: "#/components/schemas/StartRun" } } } },
          responses: {
            "202": { description: "accepted", content: { "application/json": { schema: { type: "object", properties: { run_id: { type: "string" } } } } } },
            ...workErrors,
          },
        },
      },
      "/v1/runs/{run_id}": {
        get: {
          summary: "Read a run, optionally waiting up to wait_ms while it is running.",
          parameters: [
            { name: "run_id", in: "path", required: true, schema: { type: "string" } },
            { name: "wait_ms", in: "query", schema: { type: "integer", minimum: 0, maximum: 60000 } },
          ],
          responses: { "200": ref("RunView", "the run with every call and its result"), "404": ref("Error", "no such run (or not yours)"), ...errors },
        },
      },
      "/v1/runs/{run_id}/cancel": {
        post: {
          summary:
            "Cancel a managed run: it stops with reason cancelled; calls already executing finish, calls waiting for approval are withdrawn, nothing new is proposed.",
          parameters: [{ name: "run_id", in: "path", required: true, schema: { type: "string" } }],
          responses: {
            "200": ref("RunView", "the run, stopped"),
            "404": ref("Error", "no such run (or not yours)"),
            "409": ref("Error", "the run already ended (RUN_ENDED), or is host-driven (RUN_IS_EXTERNAL)"),
            ...errors,
          },
        },
      },
      "/v1/tool-calls": {
        post: {
          summary:
            "Bring your own loop: validate, authorize and execute a model's tool calls; wait up to wait_ms for their results. Within a run, a call id sent again with the same tool and arguments is the same call.",
          parameters: [IdempotencyKeyHeader],
          requestBody: { required: true, content: { "application/json": { schema: { $ref: "#/components/schemas/SubmitCalls" } } } },
          responses: {
            "200": { description: "every call ended", content: { "application/json": { schema: { type: "object" } } } },
            "202": { description: "some calls are still running or waiting for approval", content: { "application/json": { schema: { type: "object" } } } },
            ...workErrors,
          },
        },
      },
      "/v1/tool-calls/{call_id}": {
        get: {
          summary: "Read one call and its result; with wait_ms, wait up to that long for its outcome first.",
          parameters: [
            { name: "call_id", in: "path", required: true, schema: { type: "string" } },
            { name: "wait_ms", in: "query", required: false, schema: { type: "integer", minimum: 0, maximum: 60_000, default: 0 } },
          ],
          responses: {
            "200": { description: "the call", content: { "application/json": { schema: { type: "object" } } } },
            "404": ref("Error", "no such call"),
            ...errors,
          },
        },
      },
      "/v1/tools": {
        get: {
          summary: "The tools a model may use, with contract version and hash; with ?format=<provider>, in that provider's tool-definition format.",
          parameters: [{ name: "format", in: "query", schema: { enum: [...PROVIDERS] } }],
          responses: { "200": { description: "the registry", content: { "application/json": { schema: { type: "object" } } } }, ...errors },
        },
      },
      "/v1/providers/{provider}/tool-calls": {
        post: {
          summary:
            "Bring your own loop in the provider's dialect: post its model response, get its tool results once every call has ended (202 with what is pending, e.g. awaiting approval).",
          parameters: [{ name: "provider", in: "path", required: true, schema: { enum: [...PROVIDERS] } }, IdempotencyKeyHeader],
          requestBody: { required: true, content: { "application/json": { schema: { $ref: "#/components/schemas/SubmitProviderResponse" } } } },
          responses: {
            "200": { description: "every call ended: provider-native results", content: { "application/json": { schema: { type: "object" } } } },
            "202": { description: "calls still running or awaiting approval", content: { "application/json": { schema: { type: "object" } } } },
            ...workErrors,
          },
        },
      },
      "/v1/providers/{provider}/results": {
        get: {
          summary: "Provider-native results of earlier calls, once every one has ended.",
          parameters: [
            { name: "provider", in: "path", required: true, schema: { enum: [...PROVIDERS] } },
            { name: "call_ids", in: "query", required: true, schema: { type: "string" } },
            { name: "wait_ms", in: "query", schema: { type: "integer", minimum: 0, maximum: 60000 } },
          ],
          responses: {
            "200": { description: "results", content: { "application/json": { schema: { type: "object" } } } },
            "202": { description: "pending" },
            ...errors,
          },
        },
      },
      "/mcp": {
        post: {
          summary:
            'MCP front door (Streamable HTTP, stateless): tools/list and tools/call over the registry, with every check in the path. A tools/call with params._meta["toolgate/idempotency-key"] is the same call when retried (JSON-RPC errors with data.code IDEMPOTENCY_KEY_REUSED, IDEMPOTENCY_KEY_IN_FLIGHT, UNAVAILABLE).',
          responses: {
            "200": { description: "a JSON-RPC response" },
            "503": ref("Error", "UNAVAILABLE: a tools/call while NATS or the database is down"),
            ...errors,
          },
        },
      },
      "/readyz": {
        get: {
          summary:
            "Readiness: 200 while NATS and the database are reachable, 503 (with the unavailable dependencies and Retry-After) otherwise. No credentials.",
          security: [],
          responses: {
            "200": { description: "ready", content: { "application/json": { schema: { type: "object", properties: { ready: { const: true } } } } } },
            "503": {
              description: "not ready",
              content: {
                "application/json": {
                  schema: {
                    type: "object",
                    properties: {
                      ready: { const: false },
                      unavailable: { type: "array", items: { enum: ["nats", "mongo"] } },
                      waiting: { type: "integer", minimum: 0, description: "requests waiting for the dependencies to come back" },
                    },
                  },
                },
              },
            },
          },
        },
      },
    },
  };
}
