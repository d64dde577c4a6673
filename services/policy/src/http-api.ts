import { HashSchema, type Principal } from "@toolgate/contracts";
import type { Authenticator } from "@toolgate/identity";
import type { Logger, ServiceMetrics } from "@toolgate/telemetry";
import Fastify, { type FastifyInstance, type FastifyReply } from "fastify";
import { z } from "zod";
import type { ApprovalDesk, DeskOutcome } from "./approval-desk.js";
import { APPROVAL_PAGE_CSS, APPROVAL_PAGE_HTML, APPROVAL_PAGE_JS } from "./approval-page.js";

declare module "fastify" {
  interface FastifyRequest {
    principal?: Principal;
  }
}

const DecisionBodySchema = z
  .object({
    /** The plan hash the approver was shown; when given it must be the request's. */
    plan_hash: HashSchema.optional(),
    /** A note for the audit trail (never shown to the model). */
    reason: z.string().max(400).optional(),
  })
  .strict();

const ApprovalIdSchema = z.string().regex(/^apr_[A-Za-z0-9_-]{1,64}$/);

function apiError(reply: FastifyReply, status: number, code: string, message: string, details?: unknown) {
  return reply.code(status).send({ error: { code, message, ...(details === undefined ? {} : { details }) } });
}

/**
 * Policy's HTTP API: the approvals of the caller's tenant (`GET /v1/approvals`, `GET /v1/approvals/:id`,
 * `POST /v1/approvals/:id/approve|deny`) for approvers authenticated by API key or JWT, and the approval page
 * (`/approvals`), a static page that calls the same API with the credential typed into it.
 */
export function policyApi(deps: { desk: ApprovalDesk; authenticator: Authenticator; metrics: ServiceMetrics; logger: Logger }): FastifyInstance {
  const app = Fastify({ logger: false, bodyLimit: 16 * 1024 });

  app.addHook("onSend", async (_request, reply) => {
    reply.header("x-content-type-options", "nosniff");
    reply.header("referrer-policy", "no-referrer");
    reply.header("cache-control", "no-store");
    reply.header("x-frame-options", "DENY");
  });
  app.addHook("onRequest", async (request, reply) => {
    if (!request.url.startsWith("/v1/")) return;
    const auth = await deps.authenticator.authenticate(request.headers.authorization);
    if (!auth.ok) {
      deps.logger.info({ reason: auth.reason, url: request.url.split("?")[0] }, "request not authenticated");
      return apiError(reply, 401, "UNAUTHENTICATED", "a valid API key or token is required (Authorization: Bearer …)");
    }
    request.principal = auth.principal;
  });
  app.setErrorHandler(async (error: { statusCode?: number }, _request, reply) => {
    if (error.statusCode !== undefined && error.statusCode < 500) return apiError(reply, error.statusCode, "INVALID_REQUEST", "the request could not be read");
    deps.logger.error({ err: error }, "approval request failed");
    return apiError(reply, 500, "INTERNAL", "the policy service could not complete the request");
  });

  const answer = (reply: FastifyReply, outcome: DeskOutcome) =>
    outcome.ok
      ? reply.send({ approval: outcome.approval })
      : apiError(reply, outcome.refusal.status, outcome.refusal.code, outcome.refusal.message, outcome.refusal.details);

  app.get("/healthz", () => Promise.resolve({ ok: true }));
  // Outside /v1/: no approver credentials (see METRICS_TOKEN).
  app.get("/metrics", async (request, reply) => {
    const scraped = await deps.metrics.scrape(request.headers.authorization);
    return reply.code(scraped.status).type(scraped.contentType).send(scraped.body);
  });

  // The page and its assets hold no data: everything comes from the authenticated API.
  const page = (type: string, body: string) => async (_request: unknown, reply: FastifyReply) => {
    reply.header(
      "content-security-policy",
      "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'",
    );
    return reply.type(type).send(body);
  };
  app.get("/approvals", page("text/html; charset=utf-8", APPROVAL_PAGE_HTML));
  app.get("/approvals/app.js", page("text/javascript; charset=utf-8", APPROVAL_PAGE_JS));
  app.get("/approvals/app.css", page("text/css; charset=utf-8", APPROVAL_PAGE_CSS));

  app.get("/v1/me", (request) => Promise.resolve({ principal: request.principal }));

  app.get<{ Querystring: { call_id?: string } }>("/v1/approvals", async (request) => {
    const callId = typeof request.query.call_id === "string" ? request.query.call_id : undefined;
    return { approvals: await deps.desk.list(request.principal!, callId ? { callId } : {}) };
  });

  app.get<{ Params: { id: string } }>("/v1/approvals/:id", async (request, reply) => {
    const id = ApprovalIdSchema.safeParse(request.params.id);
    if (!id.success) return apiError(reply, 404, "APPROVAL_NOT_FOUND", "no such approval request");
    return answer(reply, await deps.desk.get(id.data, request.principal!));
  });

  for (const action of ["approve", "deny"] as const) {
    app.post<{ Params: { id: string } }>(`/v1/approvals/:id/${action}`, async (request, reply) => {
      const id = ApprovalIdSchema.safeParse(request.params.id);
      if (!id.success) return apiError(reply, 404, "APPROVAL_NOT_FOUND", "no such approval request");
      const body = DecisionBodySchema.safeParse(request.body ?? {});
      if (!body.success) {
        return apiError(
          reply,
          400,
          "INVALID_REQUEST",
          "the body is { plan_hash?, reason? }",
          body.error.issues.slice(0, 5).map((i) => ({ pointer: `/${i.path.join("/")}`, message: i.message })),
        );
      }
      const input = { ...(body.data.plan_hash ? { planHash: body.data.plan_hash } : {}), ...(body.data.reason ? { note: body.data.reason } : {}) };
      const outcome =
        action === "approve" ? await deps.desk.approve(id.data, request.principal!, input) : await deps.desk.deny(id.data, request.principal!, input);
      return answer(reply, outcome);
    });
  }
  return app;
}
