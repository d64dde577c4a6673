import { newRunId, type CallId, type Principal, type ResultEnvelope, type RunId } from "@toolgate/contracts";
import type { RequestKeyRecord } from "@toolgate/storage";
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import { hasZodFastifySchemaValidationErrors, validatorCompiler, type ZodTypeProvider } from "fastify-type-provider-zod";
import type { Budgets } from "./budgets.js";
import type { CallWaiters } from "./call-waiters.js";
import type { RunWaiters } from "./run-waiters.js";
import type { Authenticator } from "@toolgate/identity";
import type { McpFrontDoor } from "./mcp-front-door.js";
import { MCP_RESOURCE_METADATA_PATH, type McpHttpPolicy } from "./mcp-http.js";
import type { Logger, ServiceMetrics } from "@toolgate/telemetry";
import { RunRequestError, type RunLoop } from "./run-loop.js";
import type { CallRecord, CallResultRecord, RunRecord, RunStore } from "./run-store.js";
import {
  CallParamsSchema,
  CallViewSchema,
  ErrorBodySchema,
  HealthSchema,
  IdempotencyHeadersSchema,
  JsonRpcErrorSchema,
  NotReadySchema,
  ResourceMetadataSchema,
  ProviderParamsSchema,
  ProviderPendingSchema,
  ProviderResultsQuerySchema,
  ProviderResultsSchema,
  ReadySchema,
  RunParamsSchema,
  RunStartedSchema,
  RunViewSchema,
  StartRunSchema,
  SubmitCallsSchema,
  SubmittedCallsSchema,
  SubmitProviderResponseSchema,
  ToolsQuerySchema,
  ToolsSchema,
  WaitQuerySchema,
} from "./api-schemas.js";
import { exportTools, formatResults, parseToolCalls, PROVIDERS, type ParsedToolCall, type ProviderName } from "@toolgate/providers";
import { noBody, registerOpenApi, response, responseSerializerCompiler, ResponseContractError, RETRY_AFTER } from "./openapi.js";
import { z } from "zod";
import { provenanceOf } from "./transcript.js";
import { jsonDepth, MAX_ARGUMENT_DEPTH, type ToolRegistry } from "@toolgate/registry";
import type { HostSubmission } from "./host-calls.js";
import { HostCallConflictError } from "./host-call-keys.js";
import { IDEMPOTENCY_HEADER, parseIdempotencyKey, principalScope, requestFingerprint, type HostIdempotency, type KeyDecision } from "./host-idempotency.js";
import { classifyFailure, withDeadline, type Availability, type Dependency } from "./outage.js";
import type { Admission, AdmissionTicket } from "./admission.js";
import { INVALID_CHARACTERS, unsafeCalls, unsafeRunRequest } from "./inbound-text.js";
import type { RunTimeline } from "./run-timeline.js";
import { isTimelinePage, registerTimelineRoutes } from "./timeline-routes.js";

declare module "fastify" {
  interface FastifyRequest {
    principal?: Principal;
    /** The place of a request that creates work (see {@link Admission}). */
    admission?: AdmissionTicket;
    /** The body as sent, before its schema applied defaults and transforms: what an Idempotency-Key's fingerprint covers. */
    sentBody?: unknown;
  }
}

/**
 * The deepest JSON body the API reads: arguments nested as deep as a contract may allow, inside any provider's
 * envelope, with room to spare. Measured on the text before it is parsed, so that no code on a request's path
 * (zod, hashing, canonical JSON) ever recurses through a deeper value.
 */
export const MAX_BODY_DEPTH = 2 * MAX_ARGUMENT_DEPTH;

/** A body nested deeper than {@link MAX_BODY_DEPTH}: answered 400 before it is parsed. */
class BodyTooDeepError extends Error {
  readonly statusCode = 400;
  constructor() {
    super(`the request's JSON nests deeper than ${MAX_BODY_DEPTH} levels`);
  }
}

function apiError(reply: FastifyReply, status: number, code: string, message: string, details?: unknown) {
  return reply.code(status).send({ error: { code, message, ...(details === undefined ? {} : { details }) } });
}

/**
 * How a route refuses a request its schemas do not allow: 400 INVALID_REQUEST with the route's message and the
 * first issues; an unknown provider is 404 UNKNOWN_PROVIDER, a malformed Idempotency-Key 400 INVALID_IDEMPOTENCY_KEY.
 */
const REFUSALS: Record<string, string> = {
  "POST /v1/runs": "invalid run request",
  "GET /v1/runs/:run_id": "expected a run id and an optional wait_ms",
  "GET /v1/runs/:run_id/timeline": "expected a run id",
  "POST /v1/runs/:run_id/cancel": "expected a run id",
  "POST /v1/tool-calls": "invalid tool-call submission",
  "GET /v1/tool-calls/:call_id": "expected a call id and wait_ms from 0 to 60000",
  "GET /v1/tools": `format must be one of ${PROVIDERS.join(", ")}`,
  "POST /v1/providers/:provider/tool-calls": "invalid submission",
  "GET /v1/providers/:provider/results": "call_ids must list 1 to 64 call ids",
};

function validationRefusal(
  route: string,
  where: string | undefined,
  validation: readonly { instancePath: string; message?: string }[],
): { status: number; code: string; message: string; details?: unknown } {
  if (where === "params" && route.includes(":provider"))
    return { status: 404, code: "UNKNOWN_PROVIDER", message: `provider must be one of ${PROVIDERS.join(", ")}` };
  if (where === "headers") return { status: 400, code: "INVALID_IDEMPOTENCY_KEY", message: "the Idempotency-Key header is malformed" };
  const details = validation.slice(0, 10).map((i) => ({ pointer: i.instancePath, message: i.message ?? "invalid" }));
  return { status: 400, code: "INVALID_REQUEST", message: REFUSALS[route] ?? "invalid request", details };
}

function stripUndefined(budgets: Partial<Record<keyof Budgets, number | undefined>>): Partial<Budgets> {
  return Object.fromEntries(Object.entries(budgets).filter(([, v]) => v !== undefined));
}

/** Routes that create work: they need the bus and the database. */
const CREATES_WORK = new Set(["POST /v1/runs", "POST /v1/tool-calls", "POST /v1/providers/:provider/tool-calls"]);

/** What a request needs to be served: nothing (health, tools), the database (reads), or both (new work). */
export function dependenciesOf(method: string, route: string | undefined, body: unknown): Dependency[] {
  const key = `${method} ${route ?? ""}`;
  if (CREATES_WORK.has(key)) return ["nats", "mongo"];
  if (key === "POST /mcp") return isToolsCall(body) ? ["nats", "mongo"] : [];
  if (route === undefined || route === "/v1/tools" || !route.startsWith("/v1/")) return [];
  return ["mongo"];
}

function isToolsCall(body: unknown): boolean {
  const messages: unknown[] = Array.isArray(body) ? body : [body];
  return messages.some((m) => typeof m === "object" && m !== null && (m as { method?: unknown }).method === "tools/call");
}

/** The public API: managed runs and bring-your-own-loop tool calls, authenticated by API key. */
export async function orchestratorApi(deps: {
  loop: RunLoop;
  store: RunStore;
  waiters: CallWaiters;
  runWaiters: RunWaiters;
  /** The contracts in force now (the catalog: new versions arrive while running). */
  contracts: { registry(): ToolRegistry };
  authenticator: Authenticator;
  mcp: McpFrontDoor;
  /** The MCP endpoint's Host/Origin allow-list and its OAuth protected-resource metadata. */
  mcpHttp: McpHttpPolicy;
  idempotency: HostIdempotency;
  availability: Availability;
  /** Bounds the work requests start at once; beyond it they are answered 503 before touching the store. */
  admission: Admission;
  /** Longest the API waits for its dependencies to accept new work, and the `Retry-After` of a 503. */
  outage: { deadlineMs: number; retryAfterS: number };
  /** Served at `GET /metrics` (no API credentials: see `METRICS_TOKEN`). */
  metrics: ServiceMetrics;
  /** A run's timeline (`GET /v1/runs/{run_id}/timeline` and the page at `/timeline`). */
  timeline: Pick<RunTimeline, "of">;
  logger: Logger;
}): Promise<FastifyInstance> {
  const app = Fastify({ logger: false, bodyLimit: 1024 * 1024 }).withTypeProvider<ZodTypeProvider>();
  // Requests are parsed by their routes' zod schemas (once: handlers get the parsed values); responses are
  // checked by the JSON Schema the document shows, compiled once (see responseSerializerCompiler).
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(responseSerializerCompiler);
  await registerOpenApi(app);
  // Fastify's own JSON parser (prototype-poisoning checks included), once the body's depth has been checked.
  const parseJson = app.getDefaultJsonParser("error", "error");
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "string" }, (request, body, done) => {
    const text = typeof body === "string" ? body : body.toString("utf8");
    if (jsonDepth(text) > MAX_BODY_DEPTH) return done(new BodyTooDeepError(), undefined);
    void parseJson(request, text, done);
  });

  const isMcp = (url: string) => url === "/mcp" || url.startsWith("/mcp?");
  // DNS rebinding: a request to the MCP endpoint must name an allowed Host (and, from a browser, Origin), before
  // anything else about it is looked at.
  app.addHook("onRequest", async (request, reply) => {
    if (!isMcp(request.url)) return;
    const refusal = deps.mcpHttp.refusal(request.headers);
    if (!refusal) return;
    deps.logger.warn({ host: request.headers.host, origin: request.headers.origin, status: 403 }, "MCP request refused: Host or Origin not allowed");
    return reply.code(403).send({ jsonrpc: "2.0", error: { code: -32000, message: `Forbidden: ${refusal}` }, id: null });
  });
  app.addHook("onRequest", async (request, reply) => {
    if (request.url === "/healthz" || request.url === "/readyz" || request.url === "/openapi.json" || request.url === "/metrics") return;
    if (request.url.startsWith("/.well-known/oauth-protected-resource")) return;
    // The timeline page holds no data: its script asks for a credential and sends it to the API.
    if (isTimelinePage(request.url)) return;
    const auth = await deps.authenticator.authenticate(request.headers.authorization);
    if (!auth.ok) {
      // The reason is for operators; the caller only learns that it is not authenticated.
      deps.logger.info({ reason: auth.reason, url: request.url }, "request not authenticated");
      // An MCP client learns where to get a token (RFC 9728 §5.1, as the MCP authorization spec asks).
      if (isMcp(request.url))
        reply.header("www-authenticate", deps.mcpHttp.wwwAuthenticate(deps.mcpHttp.baseUrl(request.headers, request.protocol === "https")));
      return apiError(reply, 401, "UNAUTHENTICATED", "a valid API key or token is required (Authorization: Bearer …)");
    }
    request.principal = auth.principal;
  });

  const { deadlineMs, retryAfterS } = deps.outage;
  const unavailable = (reply: FastifyReply, dependency: string) =>
    apiError(
      reply.header("retry-after", String(retryAfterS)),
      503,
      "UNAVAILABLE",
      `the orchestrator cannot serve this now (${dependency} unavailable); retry later`,
      {
        dependency,
      },
    );

  // While a dependency is known to be down, work waits for it up to the deadline (never touching it before it is
  // back), then is refused with 503 and Retry-After.
  app.addHook("preHandler", async (request, reply) => {
    const needed = dependenciesOf(request.method, request.routeOptions.url, request.body);
    const arrived = Date.now();
    if (needed.length > 0 && !(await deps.availability.whenAvailable(needed, deadlineMs))) {
      const down = deps.availability.unavailable().filter((d) => needed.includes(d.dependency));
      deps.logger.warn({ method: request.method, route: request.routeOptions.url, status: 503, unavailable: down }, "request refused: dependency unavailable");
      return unavailable(reply, down.map((d) => d.dependency).join(", ") || "dependency");
    }
    if (!needed.includes("nats")) return;
    // In line for a place, for what is left of the time it would wait for a dependency.
    const ticket = await deps.admission.admit(deadlineMs - (Date.now() - arrived));
    if (ticket && request.socket.destroyed) {
      // The client went away while it waited: nothing was started, and its place goes to the next in line.
      ticket.release();
      return reply.hijack();
    }
    if (ticket) {
      request.admission = ticket;
      return;
    }
    deps.logger.warn(
      { method: request.method, route: request.routeOptions.url, status: 503, in_flight: deps.admission.inFlight, waiting: deps.admission.waiting },
      "request refused: overloaded",
    );
    return apiError(
      reply.header("retry-after", String(retryAfterS)),
      503,
      "UNAVAILABLE",
      "the orchestrator is starting as much work as it can take; retry later",
      { dependency: "capacity" },
    );
  });
  // A request that started no work gives its place back when it ends, however it ends.
  const giveBack = (request: FastifyRequest, _reply: unknown, done: () => void) => {
    request.admission?.release();
    done();
  };
  app.addHook("onResponse", giveBack);
  app.addHook("onRequestAbort", (request, done) => giveBack(request, undefined, done));

  // The body as sent, for the fingerprint of an Idempotency-Key (validation replaces it by its parsed value).
  app.addHook("preValidation", (request, _reply, done) => {
    request.sentBody = request.body;
    done();
  });

  app.setNotFoundHandler((request, reply) => apiError(reply, 404, "NOT_FOUND", `no route ${request.method} ${request.url.split("?")[0]}`));

  app.setErrorHandler(async (error: { statusCode?: number; validationContext?: string }, request, reply) => {
    if (hasZodFastifySchemaValidationErrors(error)) {
      const refusal = validationRefusal(`${request.method} ${request.routeOptions.url ?? ""}`, error.validationContext, error.validation);
      return apiError(reply, refusal.status, refusal.code, refusal.message, refusal.details);
    }
    if (error instanceof ResponseContractError) {
      // A bug of ours: the response is withheld rather than sent unlike its documentation.
      deps.logger.error({ err: error, route: error.route, status: error.status, violations: error.violations }, "response does not match its schema");
      return apiError(reply, 500, "INTERNAL", "the orchestrator could not complete the request");
    }
    if (error instanceof BodyTooDeepError) {
      deps.logger.info({ method: request.method, url: request.url, max_depth: MAX_BODY_DEPTH }, "request refused: JSON nested too deep");
      return apiError(reply, 400, "INVALID_REQUEST", error.message, { max_depth: MAX_BODY_DEPTH });
    }
    if (error.statusCode !== undefined && error.statusCode < 500)
      return apiError(reply, error.statusCode, "INVALID_REQUEST", "the request could not be read as JSON within the size limit");
    const failure = classifyFailure(error);
    const where = { method: request.method, route: request.routeOptions.url ?? request.url };
    if (failure.kind === "unavailable") {
      deps.logger.warn({ err: error, ...where, status: 503, dependency: failure.dependency, reason: failure.reason }, "request failed: dependency unavailable");
      if (failure.dependency === "nats" || failure.dependency === "mongo") deps.availability.mark(failure.dependency, failure.reason);
      return unavailable(reply, failure.dependency);
    }
    deps.logger.error({ err: error, ...where, status: 500 }, "request failed");
    return apiError(reply, 500, "INTERNAL", "the orchestrator could not complete the request");
  });

  /** A refusal of the run loop as the API answers it, or undefined for any other failure. */
  const requestErrorAnswer = (error: unknown): { status: number; body: z.output<typeof ErrorBodySchema> } | undefined => {
    if (error instanceof RunRequestError)
      return { status: error.code === "RUN_NOT_FOUND" ? 404 : 400, body: { error: { code: error.code, message: error.message } } };
    if (error instanceof HostCallConflictError) {
      return { status: 422, body: { error: { code: error.code, message: error.message, details: { call_id: error.callId ?? null } } } };
    }
    return undefined;
  };

  /**
   * Reads the request's Idempotency-Key (none: today's behaviour) and claims it, or answers from an earlier use
   * of it: 400 for a malformed key, 422 when it was used for another request, 409 while the first request with it
   * is still creating its work. `pin` is the run a new run of this request gets (kept for a retry's takeover).
   */
  async function claimKey(
    request: FastifyRequest,
    reply: FastifyReply,
    route: string,
    pin?: string,
  ): Promise<{ answered: FastifyReply } | { decision?: KeyDecision }> {
    const parsed = parseIdempotencyKey(request.headers[IDEMPOTENCY_HEADER]);
    if (!parsed.ok) return { answered: apiError(reply, 400, "INVALID_IDEMPOTENCY_KEY", parsed.message) };
    if (parsed.key === undefined) return {};
    const decision = await deps.idempotency.beginWithin(
      {
        scope: principalScope(request.principal!),
        key: parsed.key,
        route,
        fingerprint: requestFingerprint(route, request.sentBody),
        ...(pin === undefined ? {} : { runId: pin }),
      },
      deadlineMs,
      (begun) => request.admission?.hold(begun),
    );
    if (decision.kind === "mismatch") {
      return {
        answered: apiError(reply, 422, "IDEMPOTENCY_KEY_REUSED", "this Idempotency-Key was already used for another request", { route: decision.record.route }),
      };
    }
    if (decision.kind === "in_flight") {
      reply.header("retry-after", String(decision.retryAfterS));
      return {
        answered: apiError(reply, 409, "IDEMPOTENCY_KEY_IN_FLIGHT", "the first request with this Idempotency-Key is still being processed; retry later"),
      };
    }
    if (decision.kind === "replay") reply.header("idempotent-replayed", "true");
    return { decision };
  }

  /** A replay of a stored response (a refusal, or a run's start). */
  const replayStored = (reply: FastifyReply, record: RequestKeyRecord) =>
    record.response
      ? reply.code(record.response.status).send(JSON.parse(record.response.body_json))
      : apiError(
          reply.header("retry-after", "1"),
          409,
          "IDEMPOTENCY_KEY_IN_FLIGHT",
          "the first request with this Idempotency-Key is still being processed; retry later",
        );

  /**
   * Keeps a keyed request's record up to date with its work, however long the work takes (a request answered
   * 503 at its deadline goes on): its claim held while it runs, its ids once submitted, a refusal as the response to replay, or released on
   * any other failure, so that a retry takes it over.
   */
  function track<T extends { runId: string; callIds: CallId[] }>(request: FastifyRequest, work: Promise<T>, record: RequestKeyRecord | undefined): Promise<T> {
    request.admission?.hold(work);
    if (!record) return work;
    deps.idempotency.hold(record, work);
    deps.idempotency.submitting(record, work);
    work.then(
      (ids) => deps.idempotency.submitted(record, ids),
      (error: unknown) => {
        const answer = requestErrorAnswer(error);
        if (!answer) return void deps.idempotency.fail(record);
        deps.idempotency.complete(record, answer).catch((e: unknown) => deps.logger.warn({ err: e }, "refusal not stored for the idempotency key"));
      },
    );
    return work;
  }

  /**
   * Submits a host's calls within the API's deadline; the outcomes of the calls that had ended and a handle that
   * waits for the others. A refusal is answered here (`answered`); any other failure is thrown.
   */
  async function submitHostCalls(
    request: FastifyRequest,
    reply: FastifyReply,
    submission: HostSubmission,
    record: RequestKeyRecord | undefined,
  ): Promise<
    | { answered: FastifyReply }
    | { submitted: { runId: string; callIds: CallId[] }; ended: ReadonlyMap<CallId, ResultEnvelope>; waiting: ReturnType<CallWaiters["register"]> }
  > {
    let waiting: ReturnType<CallWaiters["register"]> | undefined;
    let ended: ReadonlyMap<CallId, ResultEnvelope> = new Map();
    const work = track(
      request,
      deps.loop.submitCalls(
        request.principal!,
        submission,
        (ids: CallId[], done?: ReadonlyMap<CallId, ResultEnvelope>) => {
          ended = done ?? ended;
          waiting = deps.waiters.register(ids.filter((id) => !ended.has(id)));
        },
        // Every answer with a call still pending makes its record durable first (see `pendingRecorded`).
        { answersWithOutcomes: true },
      ),
      record,
    );
    try {
      return { submitted: await withDeadline(work, deadlineMs, "submitting the calls"), ended, waiting: waiting! };
    } catch (error) {
      // Listening stops once the submission ends, whenever that is.
      void work.then(
        () => waiting?.wait(0),
        () => waiting?.wait(0),
      );
      const answer = requestErrorAnswer(error);
      if (answer) return { answered: reply.code(answer.status).send(answer.body) };
      throw error;
    }
  }

  /**
   * Makes the records of the calls an answer names without their outcomes durable: whoever learns a call's id
   * can then find it on any replica, and list it with its run.
   */
  async function pendingRecorded(callIds: readonly CallId[], results: ReadonlyMap<CallId, ResultEnvelope>): Promise<void> {
    const pending = callIds.filter((id) => !results.has(id));
    if (pending.length > 0) await deps.loop.ensureRecorded(pending);
  }

  /** The results of calls now (those stored, then any that end within `waitMs`). */
  async function currentResults(callIds: readonly CallId[], waitMs: number): Promise<Map<CallId, ResultEnvelope>> {
    const results = new Map<CallId, ResultEnvelope>();
    const read = async (ids: readonly CallId[]) => {
      for (const stored of await Promise.all(ids.map((id) => deps.waiters.storedResult(id)))) if (stored) results.set(stored._id, stored.result);
    };
    await read(callIds);
    let missing = callIds.filter((id) => !results.has(id));
    if (missing.length === 0) return results;
    const waiting = deps.waiters.register(missing);
    // Read again once listening: a result attached in between is not missed.
    await read(missing);
    missing = missing.filter((id) => !results.has(id));
    for (const [id, result] of await waiting.wait(missing.length === 0 ? 0 : waitMs)) results.set(id, result);
    return results;
  }

  const owns = (request: FastifyRequest, run: RunRecord | null): run is RunRecord =>
    run !== null && run.principal.tenant === request.principal!.tenant && run.principal.subject === request.principal!.subject;

  /** A run's calls and their results, read side by side. */
  const callsAndResults = async (runId: RunId): Promise<[CallRecord[], CallResultRecord[]]> => {
    const { calls, results } = await deps.store.callsAndResultsOf(runId);
    return [calls, results];
  };

  /** The run as the API shows it; `read` is its calls and results when the caller read them already. */
  const runView = async (run: RunRecord, read?: Awaited<ReturnType<typeof callsAndResults>>) => {
    const [stored, results] = read ?? (await callsAndResults(run._id));
    const byCall = new Map(results.map((r) => [r._id, r]));
    // Calls this replica proposed whose records are written with their outcomes.
    const known = new Set(stored.map((c) => c._id));
    const calls = [...stored, ...deps.loop.unrecordedCalls(run._id).filter((c) => !known.has(c._id))].sort(
      (a, b) => a.created_at.getTime() - b.created_at.getTime(),
    );
    return {
      run_id: run._id,
      status: run.status,
      model: run.model,
      turn: run.turn,
      tool_calls: run.tool_calls,
      budgets: run.budgets,
      usage: { turns: run.usage.turns, tool_calls: run.usage.tool_calls, tokens: run.usage.tokens },
      ...(run.final_text === undefined ? {} : { final_text: run.final_text }),
      ...(run.stop_reason === undefined ? {} : { stop_reason: run.stop_reason }),
      calls: calls.map((c) => {
        const r = byCall.get(c._id);
        return {
          call_id: c._id,
          provider_call_id: c.provider_call_id,
          tool: c.tool_name,
          turn: c.turn,
          status: r ? r.terminal : ("pending" as const),
          ...(r ? { result: r.result } : {}),
        };
      }),
    };
  };

  // The answers routes share besides their own.
  const error = (description: string, headers?: typeof RETRY_AFTER) => response(description, ErrorBodySchema, headers);
  const unauthenticated = { 401: error("UNAUTHENTICATED: a missing, unknown or expired API key or token") };
  const failed = { 500: error("INTERNAL: the orchestrator could not complete the request (a bug: see its log)") };
  const unavailableAnswer = {
    503: error(
      "UNAVAILABLE: the database (or for new work NATS) is unavailable, answered within ORCHESTRATOR_UNAVAILABLE_AFTER_MS; retry after Retry-After seconds",
      RETRY_AFTER,
    ),
  };
  const reads = { ...unauthenticated, ...failed, ...unavailableAnswer };
  const bodyRefusals = {
    413: error("INVALID_REQUEST: the body is larger than 1 MiB"),
    415: error("INVALID_REQUEST: the body is not application/json"),
  };
  /** The answers every endpoint that creates work may give besides its own. */
  const work = {
    ...reads,
    ...bodyRefusals,
    409: error(
      "IDEMPOTENCY_KEY_IN_FLIGHT: the first request with this Idempotency-Key is still creating its work; retry after Retry-After seconds",
      RETRY_AFTER,
    ),
    422: error(
      "IDEMPOTENCY_KEY_REUSED: the key was used for another request; PROVIDER_CALL_ID_CONFLICT: a provider call id of this run was used for another tool or other arguments",
    ),
    503: error(
      "UNAVAILABLE: NATS or the database is unavailable (answered within ORCHESTRATOR_UNAVAILABLE_AFTER_MS), or the orchestrator is starting as much work as it can take; retry after Retry-After seconds, with the same Idempotency-Key",
      RETRY_AFTER,
    ),
  };

  app.get(
    "/healthz",
    { schema: { summary: "Liveness: the process serves HTTP. No credentials.", security: [], response: { 200: response("alive", HealthSchema) } } },
    () => Promise.resolve({ ok: true as const }),
  );
  // Ready while NATS and the database are reachable: a load balancer sends work elsewhere meanwhile.
  app.get(
    "/readyz",
    {
      schema: {
        summary: "Readiness: 200 while NATS and the database are reachable, 503 (with the unavailable dependencies and Retry-After) otherwise. No credentials.",
        security: [],
        response: { 200: response("ready", ReadySchema), 503: response("not ready", NotReadySchema, RETRY_AFTER), ...failed },
      },
    },
    async (_request, reply) => {
      const down = deps.availability.unavailable();
      // Which dependency, not why: the reasons are in the log, and this endpoint needs no credentials. `waiting`:
      // the requests waiting for it to come back (each up to the deadline).
      if (down.length > 0)
        return reply
          .code(503)
          .header("retry-after", String(retryAfterS))
          .send({ ready: false, unavailable: down.map((d) => d.dependency), waiting: deps.availability.waiting });
      return { ready: true as const };
    },
  );
  app.get(
    "/openapi.json",
    {
      schema: {
        summary: "This document (OpenAPI 3.1), generated from the schemas the routes validate with. No credentials.",
        security: [],
        response: { 200: response("the OpenAPI document", z.record(z.string(), z.unknown())) },
      },
    },
    () => Promise.resolve(app.swagger() as unknown as Record<string, unknown>),
  );
  app.get(
    "/metrics",
    {
      schema: {
        summary: "Prometheus metrics. No API credentials: when METRICS_TOKEN is set, `Authorization: Bearer <METRICS_TOKEN>`.",
        security: [],
        response: {
          200: { description: "the exposition text", content: { "text/plain": { schema: z.string() } } },
          401: { description: "METRICS_TOKEN is set and was not given", content: { "text/plain": { schema: z.string() } } },
        },
      },
    },
    async (request, reply) => {
      const scraped = await deps.metrics.scrape(request.headers.authorization);
      return reply.code(scraped.status).type(scraped.contentType).send(scraped.body);
    },
  );

  // RFC 9728: where an MCP client finds the authorization servers whose tokens this endpoint accepts.
  for (const path of ["/.well-known/oauth-protected-resource", MCP_RESOURCE_METADATA_PATH]) {
    app.get(
      path,
      {
        schema: {
          summary: "OAuth 2.0 protected-resource metadata (RFC 9728) of the MCP endpoint: the authorization servers whose tokens it accepts. No credentials.",
          security: [],
          response: { 200: response("the metadata", ResourceMetadataSchema) },
        },
      },
      (request) => Promise.resolve(deps.mcpHttp.resourceMetadata(deps.mcpHttp.baseUrl(request.headers, request.protocol === "https"))),
    );
  }

  // The MCP front door: the SDK's transport writes the response itself.
  // A body the API cannot read is refused before the transport sees it, with the API's error body; what the
  // transport refuses is a JSON-RPC error.
  const mcpError = z.union([JsonRpcErrorSchema, ErrorBodySchema]);
  const mcpRefusals = {
    400: response(
      "a body that is not JSON (INVALID_REQUEST) or not a JSON-RPC message, a batch too large, an unsupported MCP-Protocol-Version, an initialize whose Toolgate-Run-Id / Toolgate-Task-Id the server refuses, or a DELETE without Mcp-Session-Id",
      mcpError,
    ),
    401: error("UNAUTHENTICATED, with WWW-Authenticate naming the protected-resource metadata (resource_metadata=…)"),
    403: response("the Host or Origin header is not allowed (DNS rebinding protection)", JsonRpcErrorSchema),
    404: response("Mcp-Session-Id names no session of the caller (it expired, or never existed): initialize again", JsonRpcErrorSchema),
    406: response("the Accept header does not allow application/json and text/event-stream", JsonRpcErrorSchema),
    ...failed,
  };
  app.route({
    method: ["GET", "POST", "DELETE"],
    url: "/mcp",
    schema: {
      summary:
        "MCP front door (Streamable HTTP, protocol 2025-11-25): tools/list, tools/call (also as a task: tasks/get, tasks/result, tasks/list, and tasks/cancel, which withdraws the approval request of a call that waits for a human), logging/setLevel, over the registry with every check in the path. initialize issues Mcp-Session-Id, bound to a run and its task (Toolgate-Run-Id, Toolgate-Task-Id); an identical call in a session joins the first. POST carries JSON-RPC messages (a tools/call or tasks/result answers as an event stream with its progress and log messages); GET opens an event stream that sends nothing. A call waiting for a human is APPROVAL_REQUIRED (or a URL elicitation, -32042, for clients that support it). JSON-RPC errors carry data.code (IDEMPOTENCY_KEY_REUSED, IDEMPOTENCY_KEY_IN_FLIGHT, UNAVAILABLE, CALL_PENDING).",
      response: {
        200: {
          description: "POST: the JSON-RPC response (or an array of them for a batch); GET: an event stream",
          content: {
            "application/json": { schema: z.union([z.record(z.string(), z.unknown()), z.array(z.record(z.string(), z.unknown()))]) },
            "text/event-stream": { schema: z.string() },
          },
        },
        202: noBody("POST of notifications or responses only: accepted"),
        204: noBody("DELETE: the session (Mcp-Session-Id) ended with its tasks; its id is unknown from then on (404)"),
        ...mcpRefusals,
        405: response("a method the transport does not serve", JsonRpcErrorSchema),
        413: response("the body is larger than 1 MiB", mcpError),
        415: response("POST without Content-Type: application/json", mcpError),
        503: response("UNAVAILABLE: a tools/call while NATS or the database is down, or while the orchestrator is at capacity", ErrorBodySchema, RETRY_AFTER),
      },
    },
    handler: async (request, reply) => {
      reply.hijack();
      try {
        await deps.mcp.handle(request.principal!, request.raw, reply.raw, request.body, request.admission);
      } catch (error) {
        deps.logger.error({ err: error, status: 500 }, "MCP request failed");
        if (!reply.raw.headersSent)
          reply.raw
            .writeHead(500, { "content-type": "application/json" })
            .end(JSON.stringify({ error: { code: "INTERNAL", message: "the MCP request failed" } }));
      } finally {
        // A hijacked reply skips the response hooks.
        request.admission?.release();
      }
    },
  });

  registerTimelineRoutes(app, { timeline: deps.timeline, store: deps.store });

  // What the model may use: as Toolgate knows it (contract version and hash included), or in a provider's format.
  app.get(
    "/v1/tools",
    {
      schema: {
        summary: "The tools a model may use, with contract version and hash; with ?format=<provider>, in that provider's tool-definition format.",
        querystring: ToolsQuerySchema,
        response: { 200: response("the registry", ToolsSchema), 400: error("INVALID_REQUEST: an unknown format"), ...unauthenticated, ...failed },
      },
    },
    async (request, reply) => {
      const format = request.query.format;
      if (format !== undefined) {
        const exported = exportTools(
          format,
          deps.contracts
            .registry()
            .list()
            .map((t) => t.contract),
        );
        if (!exported.ok) {
          deps.logger.error({ err: exported.error, format, status: 500 }, "tools could not be exported");
          return apiError(reply, 500, "INTERNAL", exported.error.message);
        }
        const formatted: z.output<typeof ToolsSchema> = { format, tools: exported.tools, notes: exported.notes };
        return formatted;
      }
      const registry: z.output<typeof ToolsSchema> = {
        tools: deps.contracts
          .registry()
          .list()
          .filter((t) => t.contract.enabled)
          .map(({ contract, hash, inputSchema, untrustedOutput }) => ({
            name: contract.name,
            version: contract.version,
            hash,
            description: contract.description,
            // As enforced: what the arguments may hold, unknown fields refused.
            input_schema: inputSchema,
            output_schema: contract.output_schema,
            side_effect: contract.side_effect,
            risk: contract.risk,
            untrusted_output: untrustedOutput,
          })),
      };
      return registry;
    },
  );

  // Bring your own loop in the provider's own dialect: its model response in, its tool results out.
  app.post(
    "/v1/providers/:provider/tool-calls",
    {
      schema: {
        summary:
          "Bring your own loop in the provider's dialect: post its model response, get its tool results once every call has ended (202 with what is pending, e.g. awaiting approval).",
        params: ProviderParamsSchema,
        headers: IdempotencyHeadersSchema,
        body: SubmitProviderResponseSchema,
        response: {
          200: response("every call ended: provider-native results", ProviderResultsSchema),
          202: response("calls still running or awaiting approval", ProviderPendingSchema),
          400: error(
            "INVALID_REQUEST, a malformed Idempotency-Key (INVALID_IDEMPOTENCY_KEY), a response the provider's parser refuses (its code and pointer), NO_TOOL_CALLS, or a run the caller may not add to",
          ),
          404: error("UNKNOWN_PROVIDER, or RUN_NOT_FOUND: no such run (or not yours)"),
          ...work,
        },
      },
    },
    async (request, reply) => {
      const provider = request.params.provider;
      const body = request.body;
      const parsed = parseToolCalls(provider, body.response);
      if (!parsed.ok)
        return apiError(
          reply,
          400,
          parsed.error.code,
          parsed.error.message,
          parsed.error.pointer === undefined ? undefined : { pointer: parsed.error.pointer },
        );
      if (parsed.calls.length === 0) return apiError(reply, 400, "NO_TOOL_CALLS", "the response proposes no tool calls");
      const claimed = await claimKey(request, reply, `POST /v1/providers/${provider}/tool-calls`, body.run_id ? undefined : newRunId());
      if ("answered" in claimed) return claimed.answered;
      const { decision } = claimed;
      if (decision?.kind === "replay") {
        const { run_id, call_ids } = decision.record;
        if (!run_id || !call_ids) return replayStored(reply, decision.record);
        request.admission?.release();
        return providerResults(reply, provider, run_id, parsed.calls, call_ids, await currentResults(call_ids, body.wait_ms));
      }
      const record = decision?.kind === "execute" ? decision.record : undefined;
      const outcome = await submitHostCalls(
        request,
        reply,
        {
          ...(body.run_id ? { runId: body.run_id } : {}),
          ...(record?.run_id && !body.run_id ? { pinnedRunId: record.run_id, pinnedBefore: decision?.kind === "execute" && decision.takenOver } : {}),
          context: body.context,
          calls: parsed.calls.map((c) => ({ id: c.id, name: c.name, arguments: c.argumentsJson })),
        },
        record,
      );
      if ("answered" in outcome) return outcome.answered;
      request.admission?.release();
      const results = new Map([...outcome.ended, ...(await outcome.waiting.wait(body.wait_ms))]);
      return providerResults(reply, provider, outcome.submitted.runId, parsed.calls, outcome.submitted.callIds, results);
    },
  );

  // Later reads of the same calls, in the provider's format, once every one has ended.
  app.get(
    "/v1/providers/:provider/results",
    {
      schema: {
        summary: "Provider-native results of earlier calls, once every one has ended; waits up to wait_ms only for the calls still running.",
        params: ProviderParamsSchema,
        querystring: ProviderResultsQuerySchema,
        response: {
          200: response("every call ended: provider-native results", ProviderResultsSchema),
          202: response("calls still running or awaiting approval", ProviderPendingSchema),
          400: error("INVALID_REQUEST: call_ids must list 1 to 64 call ids, wait_ms 0 to 60000"),
          404: error("UNKNOWN_PROVIDER, or CALL_NOT_FOUND: no such calls in one run of yours"),
          ...reads,
        },
      },
    },
    async (request, reply) => {
      const provider = request.params.provider;
      const ids = request.query.call_ids;
      const query = request.query;
      const calls = await Promise.all(ids.map(async (id) => (await deps.loop.findCall(id)) ?? null));
      const runIds = new Set(calls.map((c) => c?.run_id));
      const run = runIds.size === 1 && calls[0] ? await deps.store.getRun(calls[0].run_id) : null;
      if (calls.some((c) => c === null) || !owns(request, run)) return apiError(reply, 404, "CALL_NOT_FOUND", "no such calls in one run of yours");
      // Calls that ended before this request are read first: only the others are waited for.
      const results = await deps.waiters.register(ids, { storedFirst: true }).wait(query.wait_ms);
      const parsedCalls = calls.map((c) => ({ id: c!.provider_call_id, name: c!.tool_name, argumentsJson: c!.arguments_json }));
      return providerResults(reply, provider, run._id, parsedCalls, ids, results);
    },
  );

  /** 200 with the provider-native results when every call ended; 202 with what is still pending otherwise. */
  async function providerResults(
    reply: FastifyReply,
    provider: ProviderName,
    runId: string,
    calls: ParsedToolCall[],
    callIds: string[],
    results: Map<string, ResultEnvelope>,
  ) {
    const mapping = calls.map((c, i) => ({ id: c.id, call_id: callIds[i]! }));
    if (results.size < callIds.length) {
      await pendingRecorded(callIds, results);
      const awaiting = new Set((await deps.store.pendingApprovals(runId)).map((w) => w._id));
      const pending = mapping.filter((m) => !results.has(m.call_id)).map((m) => ({ ...m, status: awaiting.has(m.call_id) ? "awaiting_approval" : "running" }));
      return reply.code(202).send({ run_id: runId, complete: false, calls: mapping, pending });
    }
    const formatted = formatResults(
      provider,
      calls,
      mapping.map((m, i) => ({ id: m.id, result: results.get(m.call_id)!, provenance: provenanceOf(calls[i]!.name, deps.contracts.registry()) })),
    );
    if (!formatted.ok) {
      deps.logger.error({ err: formatted.error, run_id: runId, provider, status: 500 }, "tool results could not be formatted for the provider");
      return apiError(reply, 500, "INTERNAL", formatted.error.message);
    }
    return reply.code(200).send({ run_id: runId, complete: true, calls: mapping, results: formatted.output });
  }

  app.post(
    "/v1/runs",
    {
      schema: {
        summary: "Start a managed run: Toolgate drives the model and the tool loop within the run's budgets.",
        headers: IdempotencyHeadersSchema,
        body: StartRunSchema,
        response: {
          202: response("accepted: the run started", RunStartedSchema),
          400: error(
            "INVALID_REQUEST, INVALID_CHARACTERS, a malformed Idempotency-Key (INVALID_IDEMPOTENCY_KEY), or a run the server refuses (e.g. UNKNOWN_MODEL)",
          ),
          404: error("RUN_NOT_FOUND"),
          ...work,
        },
      },
    },
    async (request, reply) => {
      const body = request.body;
      const unsafe = unsafeRunRequest(body);
      if (unsafe) return apiError(reply, 400, INVALID_CHARACTERS, unsafe.message, { pointer: unsafe.pointer });
      const claimed = await claimKey(request, reply, "POST /v1/runs");
      if ("answered" in claimed) return claimed.answered;
      const { decision } = claimed;
      if (decision?.kind === "replay") return replayStored(reply, decision.record);
      const record = decision?.kind === "execute" ? decision.record : undefined;
      // The run id is minted by the loop: a claim whose owner died before storing its answer is taken over by a
      // retry, which starts a run of its own (the window is the few milliseconds of the start's writes); an owner
      // that is only slow holds its claim.
      const work = (async () => {
        const runId = await deps.loop.startRun(request.principal!, body.model, body.input, body.context, stripUndefined(body.budgets));
        if (record) await deps.idempotency.complete(record, { status: 202, body: { run_id: runId } }, { runId, callIds: [] });
        return runId;
      })();
      request.admission?.hold(work);
      if (record) deps.idempotency.hold(record, work);
      if (record)
        work.catch((error: unknown) => {
          const answer = requestErrorAnswer(error);
          if (!answer) return void deps.idempotency.fail(record);
          deps.idempotency.complete(record, answer).catch((e: unknown) => deps.logger.warn({ err: e }, "refusal not stored for the idempotency key"));
        });
      try {
        const runId = await withDeadline(work, deadlineMs, "starting the run");
        return reply.code(202).send({ run_id: runId });
      } catch (error) {
        const answer = requestErrorAnswer(error);
        if (answer) return reply.code(answer.status).send(answer.body);
        throw error;
      }
    },
  );

  app.get(
    "/v1/runs/:run_id",
    {
      schema: {
        summary: "Read a run, optionally waiting up to wait_ms while it is running.",
        params: RunParamsSchema,
        querystring: WaitQuerySchema,
        response: {
          200: response("the run with every call and its result", RunViewSchema),
          400: error("INVALID_REQUEST: expected a run id and wait_ms from 0 to 60000"),
          404: error("RUN_NOT_FOUND: no such run (or not yours)"),
          ...reads,
        },
      },
    },
    async (request, reply) => {
      const id = request.params.run_id;
      const query = request.query;
      let run = await deps.store.getRun(id);
      // A denial and a missing run look the same: existence is not revealed to other principals.
      if (!owns(request, run)) return apiError(reply, 404, "RUN_NOT_FOUND", "no such run");
      if (run.status === "running" && query.wait_ms > 0) {
        // A look after the first one is prompted by the run's end (or the slow poll): its calls and results are
        // read alongside the run, so that the answer does not wait for a round trip more.
        let looks = 0;
        const ended = await deps.runWaiters.until(id, query.wait_ms, async () => {
          const [now, read] = looks++ === 0 ? [await deps.store.getRun(id)] : await Promise.all([deps.store.getRun(id), callsAndResults(id)]);
          return now && now.status !== "running" ? { run: now, read } : undefined;
        });
        if (ended) return runView(ended.run, ended.read);
        run = (await deps.store.getRun(id)) ?? run;
      }
      return runView(run);
    },
  );

  app.post(
    "/v1/runs/:run_id/cancel",
    {
      schema: {
        summary:
          "Cancel a managed run: it stops with reason cancelled; calls already executing finish, calls waiting for approval are withdrawn, nothing new is proposed.",
        params: RunParamsSchema,
        response: {
          200: response("the run, stopped", RunViewSchema),
          400: error("INVALID_REQUEST: expected a run id"),
          404: error("RUN_NOT_FOUND: no such run (or not yours)"),
          409: error("the run already ended (RUN_ENDED), or is host-driven (RUN_IS_EXTERNAL)"),
          ...reads,
          ...bodyRefusals,
        },
      },
    },
    async (request, reply) => {
      const id = request.params.run_id;
      try {
        const cancelled = await deps.loop.cancelRun(request.principal!, id);
        const run = (await deps.store.getRun(id))!;
        if (!cancelled) return apiError(reply, 409, "RUN_ENDED", `the run already ended (${run.stop_reason ?? run.status})`);
        return await runView(run);
      } catch (error) {
        if (error instanceof RunRequestError) return apiError(reply, error.code === "RUN_NOT_FOUND" ? 404 : 409, error.code, error.message);
        throw error;
      }
    },
  );

  app.post(
    "/v1/tool-calls",
    {
      schema: {
        summary:
          "Bring your own loop: validate, authorize and execute a model's tool calls; wait up to wait_ms for their results. Within a run, a call id sent again with the same tool and arguments is the same call.",
        headers: IdempotencyHeadersSchema,
        body: SubmitCallsSchema,
        response: {
          200: response("every call ended", SubmittedCallsSchema),
          202: response("some calls are still running or waiting for approval", SubmittedCallsSchema),
          400: error("INVALID_REQUEST, INVALID_CHARACTERS, a malformed Idempotency-Key (INVALID_IDEMPOTENCY_KEY), or a run the caller may not add to"),
          404: error("RUN_NOT_FOUND: run_id names no run of yours"),
          ...work,
        },
      },
    },
    async (request, reply) => {
      const body = request.body;
      const unsafe = unsafeCalls(body.calls);
      if (unsafe) return apiError(reply, 400, INVALID_CHARACTERS, unsafe.message, { pointer: unsafe.pointer });
      const answer = async (runId: string, callIds: readonly CallId[], results: ReadonlyMap<CallId, ResultEnvelope>) => {
        await pendingRecorded(callIds, results);
        return reply.code(results.size === callIds.length ? 200 : 202).send({
          run_id: runId,
          results: callIds.map((callId, i) => {
            const result = results.get(callId);
            return { id: body.calls[i]!.id, call_id: callId, status: result ? "done" : "pending", ...(result ? { result } : {}) };
          }),
        });
      };
      const claimed = await claimKey(request, reply, "POST /v1/tool-calls", body.run_id ? undefined : newRunId());
      if ("answered" in claimed) return claimed.answered;
      const { decision } = claimed;
      if (decision?.kind === "replay") {
        const { run_id, call_ids } = decision.record;
        if (!run_id || !call_ids) return replayStored(reply, decision.record);
        request.admission?.release();
        return answer(run_id, call_ids, await currentResults(call_ids, body.wait_ms));
      }
      const record = decision?.kind === "execute" ? decision.record : undefined;
      const outcome = await submitHostCalls(
        request,
        reply,
        {
          ...(body.run_id ? { runId: body.run_id } : {}),
          ...(record?.run_id && !body.run_id ? { pinnedRunId: record.run_id, pinnedBefore: decision?.kind === "execute" && decision.takenOver } : {}),
          context: body.context,
          calls: body.calls,
        },
        record,
      );
      if ("answered" in outcome) return outcome.answered;
      request.admission?.release();
      const results = new Map([...outcome.ended, ...(await outcome.waiting.wait(body.wait_ms))]);
      return answer(outcome.submitted.runId, outcome.submitted.callIds, results);
    },
  );

  app.get(
    "/v1/tool-calls/:call_id",
    {
      schema: {
        summary: "Read one call and its result; with wait_ms, wait up to that long for its outcome first.",
        params: CallParamsSchema,
        querystring: WaitQuerySchema,
        response: {
          200: response("the call, with its result once it ended", CallViewSchema),
          400: error("INVALID_REQUEST: expected a call id and wait_ms from 0 to 60000"),
          404: error("CALL_NOT_FOUND: no such call (or not yours)"),
          ...reads,
        },
      },
    },
    async (request, reply) => {
      const id = request.params.call_id;
      const query = request.query;
      const call = (await deps.loop.findCall(id)) ?? null;
      const run = call ? await deps.store.getRun(call.run_id) : null;
      if (!call || !owns(request, run)) return apiError(reply, 404, "CALL_NOT_FOUND", "no such call");
      // A long poll: one request per outcome instead of one per polling interval (registered before the read,
      // so an outcome attached in between is not missed).
      if (query.wait_ms > 0) await deps.waiters.register([call._id], { storedFirst: true }).wait(query.wait_ms);
      // Told of the outcome before its attach landed: the answer waits for that write, not for the next poll.
      const result = await deps.waiters.storedResult(call._id);
      return {
        call_id: call._id,
        run_id: call.run_id,
        provider_call_id: call.provider_call_id,
        tool: call.tool_name,
        status: result ? result.terminal : ("pending" as const),
        ...(result ? { result: result.result } : {}),
      };
    },
  );

  return app;
}
