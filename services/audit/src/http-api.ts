import { timingSafeEqual } from "node:crypto";
import { CallIdSchema, RunIdSchema } from "@toolgate/contracts";
import type { AuditRecord, MongoAuditStore } from "@toolgate/storage";
import type { ServiceMetrics } from "@toolgate/telemetry";
import Fastify, { type FastifyInstance } from "fastify";
import type { AuditMetrics } from "./metrics.js";

function view(r: AuditRecord) {
  return {
    idx: r.idx,
    stream_seq: r.stream_seq,
    hash: r.hash,
    prev_hash: r.prev_hash,
    stored_at: r.stored_at,
    // What the event arrived with: the digest of its bytes and its signature header (public data, no secret).
    ...(r.digest === undefined ? {} : { digest: r.digest, signature: r.signature ?? null }),
    event: r.event,
  };
}

function tokenMatches(header: string | undefined, token: string): boolean {
  const given = Buffer.from(header?.startsWith("Bearer ") ? header.slice(7) : "");
  const expected = Buffer.from(token);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/**
 * The audit query and verification API, and `GET /metrics` (outside the bearer token: see METRICS_TOKEN).
 * Every error is a typed JSON body; nothing internal leaks.
 */
export function auditApi(store: MongoAuditStore, options: { token?: string; metrics: ServiceMetrics; measured: AuditMetrics }): FastifyInstance {
  const app = Fastify({ logger: false, bodyLimit: 1024 });
  const bad = (message: string) => ({ error: { code: "INVALID_REQUEST", message } });

  app.addHook("onRequest", async (request, reply) => {
    if (request.url === "/healthz" || request.url === "/metrics" || options.token === undefined) return;
    if (!tokenMatches(request.headers.authorization, options.token))
      await reply.code(401).send({ error: { code: "UNAUTHENTICATED", message: "a valid bearer token is required" } });
  });
  app.setErrorHandler(async (_error, _request, reply) => reply.code(500).send({ error: { code: "INTERNAL", message: "the audit store could not answer" } }));

  app.get("/healthz", () => Promise.resolve({ ok: true }));
  app.get("/metrics", async (request, reply) => {
    const scraped = await options.metrics.scrape(request.headers.authorization);
    return reply.code(scraped.status).type(scraped.contentType).send(scraped.body);
  });
  const verified = (scope: "call" | "run", ok: boolean) => options.measured.verifications.inc({ scope, result: ok ? "ok" : "broken" });

  app.get<{ Params: { callId: string } }>("/v1/calls/:callId/events", async (request, reply) => {
    const id = CallIdSchema.safeParse(request.params.callId);
    if (!id.success) return reply.code(400).send(bad("expected a call id"));
    return { call_id: id.data, events: (await store.chain(id.data)).map(view) };
  });

  app.get<{ Params: { callId: string } }>("/v1/calls/:callId/verify", async (request, reply) => {
    const id = CallIdSchema.safeParse(request.params.callId);
    if (!id.success) return reply.code(400).send(bad("expected a call id"));
    const verification = await store.verify(id.data);
    verified("call", verification.ok);
    return { call_id: id.data, ...verification };
  });

  app.get<{ Params: { runId: string } }>("/v1/runs/:runId/events", async (request, reply) => {
    const id = RunIdSchema.safeParse(request.params.runId);
    if (!id.success) return reply.code(400).send(bad("expected a run id"));
    return { run_id: id.data, events: (await store.run(id.data)).map(view) };
  });

  app.get<{ Params: { runId: string } }>("/v1/runs/:runId/verify", async (request, reply) => {
    const id = RunIdSchema.safeParse(request.params.runId);
    if (!id.success) return reply.code(400).send(bad("expected a run id"));
    const records = await store.run(id.data);
    const chains = [...new Set(records.map((r) => r.chain_id))];
    const results = await Promise.all(chains.map(async (chain) => ({ chain, ...(await store.verify(chain)) })));
    const ok = results.every((r) => r.ok);
    verified("run", ok);
    return { run_id: id.data, ok, chains: results };
  });

  app.get<{ Querystring: { limit?: string } }>("/v1/rejected", async (request) => {
    const limit = Math.min(Math.max(Number.parseInt(request.query.limit ?? "100", 10) || 100, 1), 1_000);
    return { rejected: await store.rejected(limit) };
  });

  return app;
}
