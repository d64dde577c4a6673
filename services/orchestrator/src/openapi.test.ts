import { validate, compileErrors } from "@readme/openapi-parser";
import { newCallId, newRunId } from "@toolgate/contracts";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { orchestratorApi } from "./http-api.js";

// The HTTP layer only: what the schemas refuse never reaches the loop or the store, and the one read below is a
// store stub that returns a run the response schema does not allow.
const runId = newRunId();
const brokenRun = { _id: runId, principal: { tenant: "t", subject: "s", roles: [] }, status: "exploded", model: "m", turn: 0 };
let app: FastifyInstance;

beforeAll(async () => {
  const silent = { info() {}, warn() {}, error() {}, debug() {} };
  app = await orchestratorApi({
    loop: { unrecordedCalls: () => [] },
    store: {
      getRun: (id: string) => Promise.resolve(id === runId ? brokenRun : null),
      callsAndResultsOf: () => Promise.resolve({ calls: [], results: [] }),
    },
    authenticator: { authenticate: (h?: string) => Promise.resolve(h ? { ok: true, principal: brokenRun.principal } : { ok: false, reason: "missing" }) },
    availability: { whenAvailable: () => Promise.resolve(true), unavailable: () => [] },
    admission: { admit: () => Promise.resolve(undefined) },
    outage: { deadlineMs: 1000, retryAfterS: 1 },
    logger: silent,
  } as never);
  await app.ready();
});
afterAll(() => app.close());

const auth = { authorization: "Bearer any" };

describe("the OpenAPI document", () => {
  it("is a valid OpenAPI 3.1 document whose refs all resolve", async () => {
    const document = (await app.inject({ method: "GET", url: "/openapi.json" })).json<Record<string, unknown>>();
    expect(document.openapi).toBe("3.1.0");
    // validate() dereferences every $ref (a dangling one, as `#/$defs/__schema0` was, fails it).
    const result = await validate(structuredClone(document) as never);
    expect(result.valid, result.valid ? "" : compileErrors(result)).toBe(true);
  });

  it("documents every route with its error statuses, the health endpoints and every /mcp method", () => {
    const document = app.swagger() as unknown as { paths: Record<string, Record<string, { responses: Record<string, { headers?: object }> }>> };
    expect(Object.keys(document.paths).sort()).toEqual(
      [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
        "/healthz",
        "/mcp",
        "/metrics",
        "/openapi.json",
        "/readyz",
        "/v1/providers/{provider}/results",
        "/v1/providers/{provider}/tool-calls",
        "/v1/runs",
        "/v1/runs/{run_id}",
        "/v1/runs/{run_id}/cancel",
        "/v1/runs/{run_id}/timeline",
        "/v1/tool-calls",
        "/v1/tool-calls/{call_id}",
        "/v1/tools",
      ].sort(),
    );
    expect(Object.keys(document.paths["/mcp"]!).sort()).toEqual(["delete", "get", "post"]);
    for (const [path, operations] of Object.entries(document.paths))
      for (const [method, operation] of Object.entries(operations)) {
        const where = `${method.toUpperCase()} ${path}`;
        // Reads and new work need the database; the registry needs nothing and names nothing that could be missing.
        if (path.startsWith("/v1/") && path !== "/v1/tools")
          expect(Object.keys(operation.responses), where).toEqual(expect.arrayContaining(["400", "401", "404", "500", "503"]));
        if (operation.responses["503"]) expect(operation.responses["503"].headers, where).toHaveProperty("retry-after");
      }
  });

  it("leaves the timeline page and its assets out: they are not API", async () => {
    const document = app.swagger() as unknown as { paths: Record<string, unknown> };
    expect(Object.keys(document.paths).filter((p) => p.startsWith("/timeline"))).toEqual([]);
    const page = await app.inject({ method: "GET", url: `/timeline?run_id=${runId}` });
    expect(page.statusCode).toBe(200);
    expect(page.headers["content-security-policy"]).toContain("default-src 'none'");
    // The data is not: without credentials the timeline is refused.
    expect((await app.inject({ method: "GET", url: `/v1/runs/${runId}/timeline` })).statusCode).toBe(401);
  });

  it("names its shared schemas as components and keeps none that nothing uses", () => {
    const document = app.swagger() as unknown as { components: { schemas: Record<string, unknown> } };
    expect(Object.keys(document.components.schemas)).toEqual(
      expect.arrayContaining(["Error", "ResultEnvelope", "RunView", "CallView", "SubmittedCalls", "StartRunInput", "SubmitCallsInput"]),
    );
    expect(Object.keys(document.components.schemas)).not.toContain("StartRun");
  });
});

describe("requests and responses checked by the same schemas", () => {
  it("refuses a body its schema does not allow with 400 and the API's error body", async () => {
    const answer = await app.inject({ method: "POST", url: "/v1/tool-calls", headers: auth, payload: { calls: [] } });
    expect(answer.statusCode).toBe(400);
    expect(answer.json()).toEqual({
      error: { code: "INVALID_REQUEST", message: "invalid tool-call submission", details: [{ pointer: "/calls", message: expect.any(String) }] },
    });
  });

  it("answers an unknown provider 404 UNKNOWN_PROVIDER, before its body is read", async () => {
    const answer = await app.inject({ method: "POST", url: "/v1/providers/nope/tool-calls", headers: auth, payload: { bogus: true } });
    expect(answer.statusCode).toBe(404);
    expect(answer.json<{ error: { code: string } }>().error.code).toBe("UNKNOWN_PROVIDER");
  });

  it("refuses a malformed Idempotency-Key with INVALID_IDEMPOTENCY_KEY", async () => {
    const answer = await app.inject({
      method: "POST",
      url: "/v1/runs",
      headers: { ...auth, "idempotency-key": "with space" },
      payload: { model: "scripted" },
    });
    expect(answer.statusCode).toBe(400);
    expect(answer.json<{ error: { code: string } }>().error.code).toBe("INVALID_IDEMPOTENCY_KEY");
  });

  it("refuses a bad path parameter or query with 400 INVALID_REQUEST", async () => {
    const bad = await app.inject({ method: "GET", url: `/v1/tool-calls/${newCallId()}?wait_ms=-1`, headers: auth });
    expect(bad.statusCode).toBe(400);
    expect(bad.json<{ error: { message: string } }>().error.message).toBe("expected a call id and wait_ms from 0 to 60000");
    expect((await app.inject({ method: "GET", url: "/v1/runs/run_nope", headers: auth })).statusCode).toBe(400);
  });

  it("answers an unknown route with the API's error body", async () => {
    const answer = await app.inject({ method: "GET", url: "/v2/nothing", headers: auth });
    expect(answer.statusCode).toBe(404);
    expect(answer.json()).toEqual({ error: { code: "NOT_FOUND", message: "no route GET /v2/nothing" } });
  });

  it("withholds a response its schema does not allow: 500 INTERNAL instead of an undocumented body", async () => {
    const answer = await app.inject({ method: "GET", url: `/v1/runs/${runId}`, headers: auth });
    expect(answer.statusCode).toBe(500);
    expect(answer.json()).toEqual({ error: { code: "INTERNAL", message: "the orchestrator could not complete the request" } });
  });
});
