import { describe, expect, it } from "vitest";
import { ApiConformance } from "./api-conformance.js";

const document = {
  openapi: "3.1.0",
  info: { title: "t", version: "1" },
  paths: {
    "/v1/things/{id}": {
      parameters: [{ name: "id", in: "path", required: true, schema: { type: "string" } }],
      get: {
        responses: {
          "200": { description: "a thing", content: { "application/json": { schema: { $ref: "#/components/schemas/Thing" } } } },
          "404": { description: "none", content: { "application/json": { schema: { type: "object", required: ["error"] } } } },
        },
      },
      delete: { responses: { "204": { description: "gone" } } },
    },
  },
  components: {
    schemas: { Thing: { type: "object", required: ["id"], properties: { id: { type: "string" } }, additionalProperties: false } },
  },
};

const get = (status: number, body: unknown) => ({ method: "GET", path: "/v1/things/t1", status, contentType: "application/json; charset=utf-8", body });

describe("ApiConformance", () => {
  it("accepts a documented status whose body matches its schema, refs resolved", async () => {
    const api = await ApiConformance.of(document);
    expect(api.check(get(200, { id: "t1" }))).toBeUndefined();
    expect(api.check({ method: "DELETE", path: "/v1/things/t1", status: 204, contentType: undefined, body: undefined })).toBeUndefined();
  });

  it("names what does not conform: the body, the status, the operation, the content type", async () => {
    const api = await ApiConformance.of(document);
    expect(api.check(get(200, { id: 1 }))).toMatch(/GET \/v1\/things\/t1 → 200: body does not match .*\/id must be string/);
    expect(api.check(get(200, { id: "t1", extra: true }))).toMatch(/must NOT have additional properties/);
    expect(api.check(get(500, {}))).toMatch(/status not documented \(documented: 200, 404\)/);
    expect(api.check({ ...get(200, { id: "t1" }), path: "/v1/other" })).toMatch(/no such operation/);
    expect(api.check({ ...get(200, "x"), contentType: "text/plain" })).toMatch(/content type text\/plain not documented/);
  });

  it("refuses a document whose refs do not resolve", async () => {
    const broken = structuredClone(document);
    broken.paths["/v1/things/{id}"].get.responses["200"].content["application/json"].schema.$ref = "#/$defs/__schema0";
    await expect(ApiConformance.of(broken)).rejects.toThrow();
  });
});
