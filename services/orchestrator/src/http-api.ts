import { CallIdSchema, newRunId, RunIdSchema, type CallId, type Principal, type ResultEnvelope } from "@toolgate/contracts";
import type { RequestKeyRecord } from "@toolgate/storage";
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import type { z } from "zod";
import type { Budgets } from "./budgets.js";
import type { CallWaiters } from "./call-waiters.js";
import type { RunWaiters } from "./run-waiters.js";
import type { Authenticator } from "@toolgate/identity";
import type { McpFrontDoor } from "./mcp-front-door.js";
import type { Logger, ServiceMetrics } from "@toolgate/telemetry";
import { RunRequestError, type RunLoop } from "./run-loop.js";
import type { RunRecord, RunStore } from "./run-store.js";
import { StartRunSchema, SubmitCallsSchema, SubmitProviderResponseSchema, WaitQuerySchema } from "./api-schemas.js";
import { exportTools, formatResults, parseToolCalls, PROVIDERS, type ParsedToolCall, type ProviderName } from "@toolgate/providers";
import { openApiDocument } from "./openapi.js";
import { provenanceOf } from "./transcript.js";
import { jsonDepth, MAX_ARGUMENT_DEPTH, type ToolRegistry } from "@toolgate/registry";
import type { HostSubmission } from "./host-calls.js";
import { HostCallConflictError } from "./host-call-keys.js";
import { IDEMPOTENCY_HEADER, parseIdempotencyKey, principalScope, requestFingerprint, type HostIdempotency, type KeyDecision } from "./host-idempotency.js";
import { classifyFailure, withDeadline, type Availability, type Dependency } from "./outage.js";
import type { Admission, AdmissionTicket } from "./admission.js";
import { INVALID_CHARACTERS, unsafeCalls, unsafeRunRequest } from "./inbound-text.js";

declare module "fastify" {
  interface FastifyRequest {
    principal?: Principal;
    /** The place of a request that creates work (see {@link Admission}). */
    admission?: AdmissionTicket;
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

function isProvider(name: string): name is ProviderName {
  return (PROVIDERS as readonly string[]).includes(name);
}

function issues(error: z.ZodError) {
  return error.issues.slice(0, 10).map((i) => ({ pointer: `/${i.path.join("/")}`, message: i.message }));
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
export function orchestratorApi(deps: {
  loop: RunLoop;
  store: RunStore;
  waiters: CallWaiters;
  runWaiters: RunWaiters;
  /** The contracts in force now (the catalog: new versions arrive while running). */
  contracts: { registry(): ToolRegistry };
  authenticator: Authenticator;
  mcp: McpFrontDoor;
  idempotency: HostIdempotency;
  availability: Availability;
  /** Bounds the work requests start at once; beyond it they are answered 503 before touching the store. */
  admission: Admission;
  /** Longest the API waits for its dependencies to accept new work, and the `Retry-After` of a 503. */
  outage: { deadlineMs: number; retryAfterS: number };
  /** Served at `GET /metrics` (no API credentials: see `METRICS_TOKEN`). */
  metrics: ServiceMetrics;
  logger: Logger;
}): FastifyInstance {
  const app = Fastify({ logger: false, bodyLimit: 1024 * 1024 });
  // Fastify's own JSON parser (prototype-poisoning checks included), once the body's depth has been checked.
  const parseJson = app.getDefaultJsonParser("error", "error");
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "string" }, (request, body, done) => {
    const text = typeof body === "string" ? body : body.toString("utf8");
    if (jsonDepth(text) > MAX_BODY_DEPTH) return done(new BodyTooDeepError(), undefined);
    void parseJson(request, text, done);
  });

  app.addHook("onRequest", async (request, reply) => {
    if (request.url === "/healthz" || request.url === "/readyz" || request.url === "/openapi.json" || request.url === "/metrics") return;
    const auth = await deps.authenticator.authenticate(request.headers.authorization);
    if (!auth.ok) {
      // The reason is for operators; the caller only learns that it is not authenticated.
      deps.logger.info({ reason: auth.reason, url: request.url }, "request not authenticated");
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

  app.setErrorHandler(async (error: { statusCode?: number }, request, reply) => {
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
  const requestErrorAnswer = (error: unknown): { status: number; body: unknown } | undefined => {
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
        fingerprint: requestFingerprint(route, request.body),
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
      deps.loop.submitCalls(request.principal!, submission, (ids: CallId[], done?: ReadonlyMap<CallId, ResultEnvelope>) => {
        ended = done ?? ended;
        waiting = deps.waiters.register(ids.filter((id) => !ended.has(id)));
      }),
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

  const runView = async (run: RunRecord) => {
    const [stored, results] = await Promise.all([deps.store.callsOf(run._id), deps.store.resultsOf(run._id)]);
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
          status: r ? r.terminal : "pending",
          ...(r ? { result: r.result } : {}),
        };
      }),
    };
  };

  app.get("/healthz", () => Promise.resolve({ ok: true }));
  // Ready while NATS and the database are reachable: a load balancer sends work elsewhere meanwhile.
  app.get("/readyz", async (_request, reply) => {
    const down = deps.availability.unavailable();
    // Which dependency, not why: the reasons are in the log, and this endpoint needs no credentials. `waiting`:
    // the requests waiting for it to come back (each up to the deadline).
    if (down.length > 0)
      return reply
        .code(503)
        .header("retry-after", String(retryAfterS))
        .send({ ready: false, unavailable: down.map((d) => d.dependency), waiting: deps.availability.waiting });
    return { ready: true };
  });
  app.get("/openapi.json", () => Promise.resolve(openApiDocument()));
  app.get("/metrics", async (request, reply) => {
    const scraped = await deps.metrics.scrape(request.headers.authorization);
    return reply.code(scraped.status).type(scraped.contentType).send(scraped.body);
  });

  // The MCP front door: the SDK's transport writes the response itself.
  app.route({
    method: ["GET", "POST", "DELETE"],
    url: "/mcp",
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

  // What the model may use: as Toolgate knows it (contract version and hash included), or in a provider's format.
  app.get<{ Querystring: { format?: string } }>("/v1/tools", async (request, reply) => {
    const format = request.query.format;
    if (format !== undefined) {
      if (!isProvider(format)) return apiError(reply, 400, "INVALID_REQUEST", `format must be one of ${PROVIDERS.join(", ")}`);
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
      return { format, tools: exported.tools, notes: exported.notes };
    }
    return {
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
  });

  // Bring your own loop in the provider's own dialect: its model response in, its tool results out.
  app.post<{ Params: { provider: string } }>("/v1/providers/:provider/tool-calls", async (request, reply) => {
    const provider = request.params.provider;
    if (!isProvider(provider)) return apiError(reply, 404, "UNKNOWN_PROVIDER", `provider must be one of ${PROVIDERS.join(", ")}`);
    const body = SubmitProviderResponseSchema.safeParse(request.body);
    if (!body.success) return apiError(reply, 400, "INVALID_REQUEST", "invalid submission", issues(body.error));
    const parsed = parseToolCalls(provider, body.data.response);
    if (!parsed.ok)
      return apiError(reply, 400, parsed.error.code, parsed.error.message, parsed.error.pointer === undefined ? undefined : { pointer: parsed.error.pointer });
    if (parsed.calls.length === 0) return apiError(reply, 400, "NO_TOOL_CALLS", "the response proposes no tool calls");
    const claimed = await claimKey(request, reply, `POST /v1/providers/${provider}/tool-calls`, body.data.run_id ? undefined : newRunId());
    if ("answered" in claimed) return claimed.answered;
    const { decision } = claimed;
    if (decision?.kind === "replay") {
      const { run_id, call_ids } = decision.record;
      if (!run_id || !call_ids) return replayStored(reply, decision.record);
      request.admission?.release();
      return providerResults(reply, provider, run_id, parsed.calls, call_ids, await currentResults(call_ids, body.data.wait_ms));
    }
    const record = decision?.kind === "execute" ? decision.record : undefined;
    const outcome = await submitHostCalls(
      request,
      reply,
      {
        ...(body.data.run_id ? { runId: body.data.run_id } : {}),
        ...(record?.run_id && !body.data.run_id ? { pinnedRunId: record.run_id, pinnedBefore: decision?.kind === "execute" && decision.takenOver } : {}),
        context: body.data.context,
        calls: parsed.calls.map((c) => ({ id: c.id, name: c.name, arguments: c.argumentsJson })),
      },
      record,
    );
    if ("answered" in outcome) return outcome.answered;
    request.admission?.release();
    const results = new Map([...outcome.ended, ...(await outcome.waiting.wait(body.data.wait_ms))]);
    return providerResults(reply, provider, outcome.submitted.runId, parsed.calls, outcome.submitted.callIds, results);
  });

  // Later reads of the same calls, in the provider's format, once every one has ended.
  app.get<{ Params: { provider: string }; Querystring: { call_ids?: string; wait_ms?: string } }>("/v1/providers/:provider/results", async (request, reply) => {
    const provider = request.params.provider;
    if (!isProvider(provider)) return apiError(reply, 404, "UNKNOWN_PROVIDER", `provider must be one of ${PROVIDERS.join(", ")}`);
    const ids = (request.query.call_ids ?? "").split(",").filter(Boolean);
    const query = WaitQuerySchema.safeParse({ wait_ms: request.query.wait_ms });
    if (ids.length === 0 || ids.length > 64 || !ids.every((id) => CallIdSchema.safeParse(id).success) || !query.success) {
      return apiError(reply, 400, "INVALID_REQUEST", "call_ids must list 1 to 64 call ids");
    }
    const calls = await Promise.all(ids.map(async (id) => (await deps.loop.findCall(id)) ?? null));
    const runIds = new Set(calls.map((c) => c?.run_id));
    const run = runIds.size === 1 && calls[0] ? await deps.store.getRun(calls[0].run_id) : null;
    if (calls.some((c) => c === null) || !owns(request, run)) return apiError(reply, 404, "CALL_NOT_FOUND", "no such calls in one run of yours");
    // Calls that ended before this request are read first: only the others are waited for.
    const results = await deps.waiters.register(ids, { storedFirst: true }).wait(query.data.wait_ms);
    const parsedCalls = calls.map((c) => ({ id: c!.provider_call_id, name: c!.tool_name, argumentsJson: c!.arguments_json }));
    return providerResults(reply, provider, run._id, parsedCalls, ids, results);
  });

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

  app.post("/v1/runs", async (request, reply) => {
    const body = StartRunSchema.safeParse(request.body);
    if (!body.success) return apiError(reply, 400, "INVALID_REQUEST", "invalid run request", issues(body.error));
    const unsafe = unsafeRunRequest(body.data);
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
      const runId = await deps.loop.startRun(request.principal!, body.data.model, body.data.input, body.data.context, stripUndefined(body.data.budgets));
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
  });

  app.get<{ Params: { runId: string } }>("/v1/runs/:runId", async (request, reply) => {
    const id = RunIdSchema.safeParse(request.params.runId);
    const query = WaitQuerySchema.safeParse(request.query);
    if (!id.success || !query.success) return apiError(reply, 400, "INVALID_REQUEST", "expected a run id and an optional wait_ms");
    let run = await deps.store.getRun(id.data);
    // A denial and a missing run look the same: existence is not revealed to other principals.
    if (!owns(request, run)) return apiError(reply, 404, "RUN_NOT_FOUND", "no such run");
    if (run.status === "running" && query.data.wait_ms > 0) {
      const ended = await deps.runWaiters.until(id.data, query.data.wait_ms, async () => {
        const now = await deps.store.getRun(id.data);
        return now && now.status !== "running" ? now : undefined;
      });
      run = ended ?? (await deps.store.getRun(id.data)) ?? run;
    }
    return runView(run);
  });

  app.post<{ Params: { runId: string } }>("/v1/runs/:runId/cancel", async (request, reply) => {
    const id = RunIdSchema.safeParse(request.params.runId);
    if (!id.success) return apiError(reply, 400, "INVALID_REQUEST", "expected a run id");
    try {
      const cancelled = await deps.loop.cancelRun(request.principal!, id.data);
      const run = (await deps.store.getRun(id.data))!;
      if (!cancelled) return apiError(reply, 409, "RUN_ENDED", `the run already ended (${run.stop_reason ?? run.status})`);
      return await runView(run);
    } catch (error) {
      if (error instanceof RunRequestError) return apiError(reply, error.code === "RUN_NOT_FOUND" ? 404 : 409, error.code, error.message);
      throw error;
    }
  });

  app.post("/v1/tool-calls", async (request, reply) => {
    const body = SubmitCallsSchema.safeParse(request.body);
    if (!body.success) return apiError(reply, 400, "INVALID_REQUEST", "invalid tool-call submission", issues(body.error));
    const unsafe = unsafeCalls(body.data.calls);
    if (unsafe) return apiError(reply, 400, INVALID_CHARACTERS, unsafe.message, { pointer: unsafe.pointer });
    const answer = (runId: string, callIds: readonly CallId[], results: ReadonlyMap<CallId, ResultEnvelope>) =>
      reply.code(results.size === callIds.length ? 200 : 202).send({
        run_id: runId,
        results: callIds.map((callId, i) => {
          const result = results.get(callId);
          return { id: body.data.calls[i]!.id, call_id: callId, status: result ? "done" : "pending", ...(result ? { result } : {}) };
        }),
      });
    const claimed = await claimKey(request, reply, "POST /v1/tool-calls", body.data.run_id ? undefined : newRunId());
    if ("answered" in claimed) return claimed.answered;
    const { decision } = claimed;
    if (decision?.kind === "replay") {
      const { run_id, call_ids } = decision.record;
      if (!run_id || !call_ids) return replayStored(reply, decision.record);
      request.admission?.release();
      return answer(run_id, call_ids, await currentResults(call_ids, body.data.wait_ms));
    }
    const record = decision?.kind === "execute" ? decision.record : undefined;
    const outcome = await submitHostCalls(
      request,
      reply,
      {
        ...(body.data.run_id ? { runId: body.data.run_id } : {}),
        ...(record?.run_id && !body.data.run_id ? { pinnedRunId: record.run_id, pinnedBefore: decision?.kind === "execute" && decision.takenOver } : {}),
        context: body.data.context,
        calls: body.data.calls,
      },
      record,
    );
    if ("answered" in outcome) return outcome.answered;
    request.admission?.release();
    const results = new Map([...outcome.ended, ...(await outcome.waiting.wait(body.data.wait_ms))]);
    return answer(outcome.submitted.runId, outcome.submitted.callIds, results);
  });

  app.get<{ Params: { callId: string }; Querystring: { wait_ms?: string } }>("/v1/tool-calls/:callId", async (request, reply) => {
    const id = CallIdSchema.safeParse(request.params.callId);
    const query = WaitQuerySchema.safeParse({ wait_ms: request.query.wait_ms });
    if (!id.success || !query.success) return apiError(reply, 400, "INVALID_REQUEST", "expected a call id and wait_ms from 0 to 60000");
    const call = (await deps.loop.findCall(id.data)) ?? null;
    const run = call ? await deps.store.getRun(call.run_id) : null;
    if (!call || !owns(request, run)) return apiError(reply, 404, "CALL_NOT_FOUND", "no such call");
    // A long poll: one request per outcome instead of one per polling interval (registered before the read,
    // so an outcome attached in between is not missed).
    if (query.data.wait_ms > 0) await deps.waiters.register([call._id], { storedFirst: true }).wait(query.data.wait_ms);
    // Told of the outcome before its attach landed: the answer waits for that write, not for the next poll.
    const result = await deps.waiters.storedResult(call._id);
    return {
      call_id: call._id,
      run_id: call.run_id,
      provider_call_id: call.provider_call_id,
      tool: call.tool_name,
      status: result ? result.terminal : "pending",
      ...(result ? { result: result.result } : {}),
    };
  });

  return app;
}
