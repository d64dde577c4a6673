import { CallIdSchema, RunIdSchema, type Principal } from "@toolgate/contracts";
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import type { z } from "zod";
import type { Budgets } from "./budgets.js";
import type { CallWaiters } from "./call-waiters.js";
import type { Authenticator } from "@toolgate/identity";
import type { Logger } from "@toolgate/telemetry";
import { RunRequestError, type RunLoop } from "./run-loop.js";
import type { RunRecord, RunStore } from "./run-store.js";
import { StartRunSchema, SubmitCallsSchema, WaitQuerySchema } from "./api-schemas.js";
import { openApiDocument } from "./openapi.js";
import type { ToolRegistry } from "@toolgate/registry";

declare module "fastify" {
  interface FastifyRequest {
    principal?: Principal;
  }
}

function apiError(reply: FastifyReply, status: number, code: string, message: string, details?: unknown) {
  return reply.code(status).send({ error: { code, message, ...(details === undefined ? {} : { details }) } });
}

function issues(error: z.ZodError) {
  return error.issues.slice(0, 10).map((i) => ({ pointer: `/${i.path.join("/")}`, message: i.message }));
}

function stripUndefined(budgets: Partial<Record<keyof Budgets, number | undefined>>): Partial<Budgets> {
  return Object.fromEntries(Object.entries(budgets).filter(([, v]) => v !== undefined));
}

/** The public API: managed runs and bring-your-own-loop tool calls, authenticated by API key. */
export function orchestratorApi(deps: {
  loop: RunLoop;
  store: RunStore;
  waiters: CallWaiters;
  registry: ToolRegistry;
  authenticator: Authenticator;
  logger: Logger;
}): FastifyInstance {
  const app = Fastify({ logger: false, bodyLimit: 1024 * 1024 });

  app.addHook("onRequest", async (request, reply) => {
    if (request.url === "/healthz" || request.url === "/openapi.json") return;
    const auth = await deps.authenticator.authenticate(request.headers.authorization);
    if (!auth.ok) {
      // The reason is for operators; the caller only learns that it is not authenticated.
      deps.logger.info({ reason: auth.reason, url: request.url }, "request not authenticated");
      return apiError(reply, 401, "UNAUTHENTICATED", "a valid API key or token is required (Authorization: Bearer …)");
    }
    request.principal = auth.principal;
  });
  app.setErrorHandler(async (error: { statusCode?: number }, _request, reply) => {
    if (error.statusCode !== undefined && error.statusCode < 500)
      return apiError(reply, error.statusCode, "INVALID_REQUEST", "the request could not be read as JSON within the size limit");
    return apiError(reply, 500, "INTERNAL", "the orchestrator could not complete the request");
  });

  const owns = (request: FastifyRequest, run: RunRecord | null): run is RunRecord =>
    run !== null && run.principal.tenant === request.principal!.tenant && run.principal.subject === request.principal!.subject;

  const runView = async (run: RunRecord) => {
    const [calls, results] = await Promise.all([deps.store.callsOf(run._id), deps.store.resultsOf(run._id)]);
    const byCall = new Map(results.map((r) => [r._id, r]));
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
  app.get("/openapi.json", () => Promise.resolve(openApiDocument()));

  // What the model may use, as Toolgate knows it (contract version and hash included).
  app.get("/v1/tools", () =>
    Promise.resolve({
      tools: deps.registry
        .list()
        .filter((t) => t.contract.enabled)
        .map(({ contract, hash }) => ({
          name: contract.name,
          version: contract.version,
          hash,
          description: contract.description,
          input_schema: contract.input_schema,
          output_schema: contract.output_schema,
          side_effect: contract.side_effect,
          risk: contract.risk,
          untrusted_output: contract.untrusted_output,
        })),
    }),
  );

  app.post("/v1/runs", async (request, reply) => {
    const body = StartRunSchema.safeParse(request.body);
    if (!body.success) return apiError(reply, 400, "INVALID_REQUEST", "invalid run request", issues(body.error));
    try {
      const runId = await deps.loop.startRun(request.principal!, body.data.model, body.data.input, body.data.context, stripUndefined(body.data.budgets));
      return reply.code(202).send({ run_id: runId });
    } catch (error) {
      if (error instanceof RunRequestError) return apiError(reply, 400, error.code, error.message);
      throw error;
    }
  });

  app.get<{ Params: { runId: string } }>("/v1/runs/:runId", async (request, reply) => {
    const id = RunIdSchema.safeParse(request.params.runId);
    const query = WaitQuerySchema.safeParse(request.query);
    if (!id.success || !query.success) return apiError(reply, 400, "INVALID_REQUEST", "expected a run id and an optional wait_ms");
    const deadline = Date.now() + query.data.wait_ms;
    let run = await deps.store.getRun(id.data);
    // A denial and a missing run look the same: existence is not revealed to other principals.
    if (!owns(request, run)) return apiError(reply, 404, "RUN_NOT_FOUND", "no such run");
    while (run.status === "running" && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      run = (await deps.store.getRun(id.data)) ?? run;
    }
    return runView(run);
  });

  app.post("/v1/tool-calls", async (request, reply) => {
    const body = SubmitCallsSchema.safeParse(request.body);
    if (!body.success) return apiError(reply, 400, "INVALID_REQUEST", "invalid tool-call submission", issues(body.error));
    let submitted: { runId: string; callIds: string[] };
    let waiting: ReturnType<CallWaiters["register"]> | undefined;
    try {
      submitted = await deps.loop.submitCalls(
        request.principal!,
        { ...(body.data.run_id ? { runId: body.data.run_id } : {}), context: body.data.context, calls: body.data.calls },
        (callIds) => (waiting = deps.waiters.register(callIds)),
      );
    } catch (error) {
      await waiting?.wait(0);
      if (error instanceof RunRequestError) return apiError(reply, error.code === "RUN_NOT_FOUND" ? 404 : 400, error.code, error.message);
      throw error;
    }
    const results = await waiting!.wait(body.data.wait_ms);
    return reply.code(results.size === submitted.callIds.length ? 200 : 202).send({
      run_id: submitted.runId,
      results: submitted.callIds.map((callId, i) => {
        const result = results.get(callId);
        return { id: body.data.calls[i]!.id, call_id: callId, status: result ? "done" : "pending", ...(result ? { result } : {}) };
      }),
    });
  });

  app.get<{ Params: { callId: string } }>("/v1/tool-calls/:callId", async (request, reply) => {
    const id = CallIdSchema.safeParse(request.params.callId);
    if (!id.success) return apiError(reply, 400, "INVALID_REQUEST", "expected a call id");
    const call = await deps.store.getCall(id.data);
    const run = call ? await deps.store.getRun(call.run_id) : null;
    if (!call || !owns(request, run)) return apiError(reply, 404, "CALL_NOT_FOUND", "no such call");
    const result = await deps.store.getResult(call._id);
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
