import fastifySwagger, { type SwaggerTransform } from "@fastify/swagger";
import { ERROR_CODES } from "@toolgate/contracts";
import { Ajv2020 } from "ajv/dist/2020.js";
import type { FastifyInstance, FastifySerializerCompiler } from "fastify";
import { createJsonSchemaTransform, createJsonSchemaTransformObject } from "fastify-type-provider-zod";
import { z } from "zod";
import { apiComponents } from "./api-schemas.js";

/** A response the orchestrator was about to send that its own schema does not allow (a bug): answered 500. */
export class ResponseContractError extends Error {
  readonly code = "RESPONSE_CONTRACT";
  constructor(
    readonly route: string,
    readonly status: string,
    readonly violations: readonly { pointer: string; message: string }[],
  ) {
    super(`the ${status} response of ${route} does not match its schema`);
  }
}

/**
 * Fastify's response serializer for routes whose responses are zod schemas: each schema is turned once into the
 * JSON Schema the OpenAPI document shows (io "output") and compiled by Ajv; a body is checked by that compiled
 * validator, then written with `JSON.stringify`. A body that does not match throws {@link ResponseContractError}.
 */
export const responseSerializerCompiler: FastifySerializerCompiler<unknown> = ({ schema, method, url, httpStatus }) => {
  if (!(schema instanceof z.ZodType)) return (data) => JSON.stringify(data);
  const validate = ajv.compile(z.toJSONSchema(schema, { target: "draft-2020-12", io: "output", unrepresentable: "any" }));
  const route = `${method} ${url}`;
  return (data) => {
    if (!validate(data)) {
      const violations = (validate.errors ?? []).slice(0, 10).map((e) => ({ pointer: e.instancePath || "/", message: e.message ?? e.keyword }));
      throw new ResponseContractError(route, httpStatus ?? "default", violations);
    }
    return JSON.stringify(data);
  };
};

// One compiler for every response schema; formats are documentation here (the zod schemas check what matters).
const ajv = new Ajv2020({ strict: true, allowUnionTypes: true, validateFormats: false, allErrors: false });

/** A JSON response of a route: its description, schema and headers, as the document shows them. */
export function response<T extends z.ZodType>(description: string, schema: T, headers?: Record<string, { description: string; schema: object }>) {
  return { description, content: { "application/json": { schema } }, ...(headers === undefined ? {} : { headers }) };
}

/** A response without a body. */
export const noBody = (description: string) => z.undefined().describe(description);

/** The `Retry-After` header of 503s and 409s. */
export const RETRY_AFTER = { "retry-after": { description: "seconds to wait before retrying", schema: { type: "integer", minimum: 0 } } };

/**
 * Registers the generator of the orchestrator's OpenAPI 3.1 document (served at `GET /openapi.json`): every
 * route's zod schemas, as the routes validate with them, with the components of {@link apiComponents} as refs.
 */
export async function registerOpenApi(app: FastifyInstance): Promise<void> {
  const transform = createJsonSchemaTransform({ schemaRegistry: apiComponents, skipList: [] });
  const transformObject = createJsonSchemaTransformObject({ schemaRegistry: apiComponents });
  await app.register(fastifySwagger, {
    openapi: {
      openapi: "3.1.0",
      info: {
        title: "Toolgate orchestrator API",
        version: "1",
        description: `Managed runs and bring-your-own-loop tool calls. Result error codes: ${Object.keys(ERROR_CODES).join(", ")}.`,
      },
      components: { securitySchemes: { apiKey: { type: "http", scheme: "bearer" } } },
      security: [{ apiKey: [] }],
    },
    transform: withResponseHeaders(transform),
    transformObject: (document) => withoutUnusedComponents(transformObject(document) as Record<string, unknown>) as ReturnType<typeof transformObject>,
  });
}

/** The zod transform keeps a response's description and content only: its headers are put back here. */
function withResponseHeaders(transform: SwaggerTransform): SwaggerTransform {
  return (input) => {
    const out = transform(input);
    const responses = (input.schema as { response?: Record<string, { headers?: unknown }> } | undefined)?.response;
    const transformed = (out.schema as { response?: Record<string, Record<string, unknown>> } | undefined)?.response;
    if (responses && transformed)
      for (const [status, declared] of Object.entries(responses)) if (declared.headers && transformed[status]) transformed[status].headers = declared.headers;
    return out;
  };
}

/**
 * The zod transform emits an input and an output variant of every registered schema; a document keeps only
 * those something refers to (a generated client gets no types nothing uses).
 */
function withoutUnusedComponents(document: Record<string, unknown>): Record<string, unknown> {
  const components = document.components as { schemas?: Record<string, unknown> } | undefined;
  const schemas = components?.schemas;
  if (!schemas) return document;
  const used = new Set<string>();
  const visit = (value: unknown): void => {
    if (Array.isArray(value)) return value.forEach(visit);
    if (value === null || typeof value !== "object") return;
    for (const [key, child] of Object.entries(value)) {
      if (key === "$ref" && typeof child === "string" && child.startsWith("#/components/schemas/")) {
        const name = child.slice("#/components/schemas/".length);
        if (!used.has(name)) {
          used.add(name);
          visit(schemas[name]);
        }
      } else visit(child);
    }
  };
  visit(document.paths);
  return { ...document, components: { ...components, schemas: Object.fromEntries(Object.entries(schemas).filter(([name]) => used.has(name))) } };
}
