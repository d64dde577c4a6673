import { compileErrors, validate } from "@readme/openapi-parser";
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";

/** One response as a client received it: the request's method and path (no query), its status and body. */
export interface RecordedResponse {
  method: string;
  path: string;
  status: number;
  contentType: string | undefined;
  /** The parsed JSON body; undefined for an empty or non-JSON body. */
  body: unknown;
}

type Responses = Record<string, { content?: Record<string, { schema?: unknown }> }>;
type OpenApiDocument = { openapi: string; paths: Record<string, Record<string, { responses?: Responses }>> };

const METHODS = new Set(["get", "put", "post", "delete", "options", "head", "patch", "trace"]);
const pointerPart = (s: string) => s.replace(/~/g, "~0").replace(/\//g, "~1");

/**
 * An OpenAPI 3.1 document and the check of responses against it: the operation is found by method and path
 * template, the status must be documented, and a JSON body must match that status's schema (compiled by Ajv,
 * once per operation and status).
 */
export class ApiConformance {
  readonly #document: OpenApiDocument;
  readonly #routes: { method: string; template: string; pattern: RegExp }[];
  readonly #ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
  readonly #validators = new Map<string, ValidateFunction>();

  private constructor(document: OpenApiDocument) {
    this.#document = document;
    this.#ajv.addSchema(document, "openapi");
    this.#routes = Object.entries(document.paths).flatMap(([template, operations]) =>
      Object.keys(operations)
        .filter((m) => METHODS.has(m))
        .map((method) => ({
          method: method.toUpperCase(),
          template,
          // An empty segment still reaches the operation (the server answers it 400), so it is matched too.
          pattern: new RegExp(`^${template.replace(/[.*+?^$()|[\]\\]/g, "\\$&").replace(/\{[^}]+\}/g, "[^/]*")}$`),
        })),
    );
  }

  /** Validates `document` with @readme/openapi-parser (every $ref resolved); throws with its errors if invalid. */
  static async of(document: unknown): Promise<ApiConformance> {
    const result = await validate(structuredClone(document) as never);
    if (!result.valid) throw new Error(`not a valid OpenAPI document:\n${compileErrors(result)}`);
    return new ApiConformance(document as OpenApiDocument);
  }

  /** Why `response` does not conform to the document, or undefined when it does. */
  check(response: RecordedResponse): string | undefined {
    const where = `${response.method} ${response.path} → ${response.status}`;
    const route = this.#routes.find((r) => r.method === response.method && r.pattern.test(response.path));
    if (!route) return `${where}: no such operation in the document`;
    const responses = this.#document.paths[route.template]![route.method.toLowerCase()]!.responses ?? {};
    const status = [String(response.status), `${String(response.status)[0]}XX`, "default"].find((s) => s in responses);
    if (status === undefined) return `${where}: status not documented (documented: ${Object.keys(responses).join(", ")})`;
    const content = responses[status]!.content;
    const mediaType = response.contentType?.split(";")[0]?.trim();
    if (!content || Object.keys(content).length === 0) return response.body === undefined ? undefined : `${where}: documented without a body`;
    if (mediaType === undefined || !(mediaType in content)) return `${where}: content type ${mediaType} not documented (${Object.keys(content).join(", ")})`;
    if (!mediaType.endsWith("json") || content[mediaType]!.schema === undefined) return undefined;
    const pointer = ["paths", route.template, route.method.toLowerCase(), "responses", status, "content", mediaType, "schema"].map(pointerPart).join("/");
    let validator = this.#validators.get(pointer);
    if (!validator) {
      validator = this.#ajv.compile({ $ref: `openapi#/${pointer}` });
      this.#validators.set(pointer, validator);
    }
    if (validator(response.body)) return undefined;
    const errors = (validator.errors ?? []).slice(0, 5).map((e) => `${e.instancePath || "/"} ${e.message ?? e.keyword}`);
    return `${where}: body does not match the documented schema (${errors.join("; ")}): ${JSON.stringify(response.body).slice(0, 300)}`;
  }
}
