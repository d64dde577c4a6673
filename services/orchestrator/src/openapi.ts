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
          requestBody: { required: true, content: { "application/json": { schema: { $ref: "#/components/schemas/StartRun" } } } },
          responses: {
            "202": { description: "accepted", content: { "application/json": { schema: { type: "object", properties: { run_id: { type: "string" } } } } } },
            ...errors,
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
          summary: "Bring your own loop: validate, authorize and execute a model's tool calls; wait up to wait_ms for their results.",
          requestBody: { required: true, content: { "application/json": { schema: { $ref: "#/components/schemas/SubmitCalls" } } } },
          responses: {
            "200": { description: "every call ended", content: { "application/json": { schema: { type: "object" } } } },
            "202": { description: "some calls are still running or waiting for approval", content: { "application/json": { schema: { type: "object" } } } },
            ...errors,
          },
        },
      },
      "/v1/tool-calls/{call_id}": {
        get: {
          summary: "Read one call and its result.",
          parameters: [{ name: "call_id", in: "path", required: true, schema: { type: "string" } }],
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
          parameters: [{ name: "provider", in: "path", required: true, schema: { enum: [...PROVIDERS] } }],
          requestBody: { required: true, content: { "application/json": { schema: { $ref: "#/components/schemas/SubmitProviderResponse" } } } },
          responses: {
            "200": { description: "every call ended: provider-native results", content: { "application/json": { schema: { type: "object" } } } },
            "202": { description: "calls still running or awaiting approval", content: { "application/json": { schema: { type: "object" } } } },
            ...errors,
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
          summary: "MCP front door (Streamable HTTP, stateless): tools/list and tools/call over the registry, with every check in the path.",
          responses: { "200": { description: "a JSON-RPC response" }, ...errors },
        },
      },
    },
  };
}
