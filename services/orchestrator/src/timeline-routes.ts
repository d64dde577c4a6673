import type { Principal } from "@toolgate/contracts";
import type { FastifyInstance, FastifyReply } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { ErrorBodySchema, RunParamsSchema } from "./api-schemas.js";
import { response, RETRY_AFTER } from "./openapi.js";
import type { RunStore } from "./run-store.js";
import { TimelineSchema, type RunTimeline } from "./run-timeline.js";
import { TIMELINE_PAGE_CSS, TIMELINE_PAGE_HTML, TIMELINE_PAGE_JS } from "./timeline-page.js";

/** The page and its assets: they hold no data, so they are served without credentials (the data route needs them). */
const PAGE_PATHS = new Set(["/timeline", "/timeline/app.js", "/timeline/app.css"]);

/** Whether a request URL (with its query) is the timeline page or one of its assets. */
export const isTimelinePage = (url: string): boolean => PAGE_PATHS.has(url.split("?")[0] ?? "");

const PAGE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'none'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'";

/**
 * Registers the run timeline: `GET /v1/runs/{run_id}/timeline` (JSON, authenticated like the rest of the API,
 * in the OpenAPI document) and the page at `/timeline?run_id=…` with its script and style (not in the document:
 * they are not API). A run is shown only to the principal that owns it.
 */
export function registerTimelineRoutes(app: FastifyInstance, deps: { timeline: Pick<RunTimeline, "of">; store: Pick<RunStore, "getRun"> }): void {
  const api = app.withTypeProvider<ZodTypeProvider>();
  const error = (description: string, headers?: typeof RETRY_AFTER) => response(description, ErrorBodySchema, headers);
  api.get(
    "/v1/runs/:run_id/timeline",
    {
      schema: {
        summary:
          "A run's turns and calls on a time axis: for each call when it was proposed, authorized, waited for approval, started (each attempt), completed and was attached, with its status, error code and duration, its events and its arguments with sensitive fields redacted. `live` says whether it can still change.",
        params: RunParamsSchema,
        response: {
          200: response("the run's timeline", TimelineSchema),
          400: error("INVALID_REQUEST: expected a run id"),
          401: error("UNAUTHENTICATED: a missing, unknown or expired API key or token"),
          404: error("RUN_NOT_FOUND: no such run (or not yours)"),
          500: error("INTERNAL: the orchestrator could not complete the request (a bug: see its log)"),
          503: error("UNAVAILABLE: the database or the event stream cannot be read now; retry after Retry-After seconds", RETRY_AFTER),
        },
      },
    },
    async (request, reply) => {
      const run = await deps.store.getRun(request.params.run_id);
      if (!run || !sameCaller(run.principal, request.principal)) return notFound(reply);
      return deps.timeline.of(run);
    },
  );

  const page = (type: string, body: string) => async (_request: unknown, reply: FastifyReply) =>
    reply
      .header("content-security-policy", PAGE_CSP)
      .header("x-content-type-options", "nosniff")
      .header("referrer-policy", "no-referrer")
      .header("cache-control", "no-store")
      .header("x-frame-options", "DENY")
      .type(type)
      .send(body);
  const hidden = { schema: { hide: true } };
  app.get("/timeline", hidden, page("text/html; charset=utf-8", TIMELINE_PAGE_HTML));
  app.get("/timeline/app.js", hidden, page("text/javascript; charset=utf-8", TIMELINE_PAGE_JS));
  app.get("/timeline/app.css", hidden, page("text/css; charset=utf-8", TIMELINE_PAGE_CSS));
}

// A denial and a missing run look the same: existence is not revealed to other principals.
const sameCaller = (owner: Principal, caller: Principal | undefined) =>
  caller !== undefined && owner.tenant === caller.tenant && owner.subject === caller.subject;

const notFound = (reply: FastifyReply) => reply.code(404).send({ error: { code: "RUN_NOT_FOUND", message: "no such run" } });
