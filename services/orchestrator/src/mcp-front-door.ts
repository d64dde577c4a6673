import { createHash, randomUUID } from "node:crypto";
import type { EventBus, Subscription } from "@toolgate/bus";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import {
  CallToolRequestSchema,
  CancelTaskRequestSchema,
  ErrorCode,
  GetTaskPayloadRequestSchema,
  GetTaskRequestSchema,
  ListTasksRequestSchema,
  ListToolsRequestSchema,
  McpError,
  RELATED_TASK_META_KEY,
  SetLevelRequestSchema,
  UrlElicitationRequiredError,
  type CallToolResult,
  type ServerNotification,
  type ServerRequest,
  type Task,
} from "@modelcontextprotocol/sdk/types.js";
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import {
  canonicalJson,
  failure,
  newRunId,
  nextCallEvent,
  RunContextSchema,
  type CallId,
  type Principal,
  type ResultEnvelope,
  type RunContext,
  type SubjectCatalogue,
  type ToolgateEvent,
} from "@toolgate/contracts";
import { exportTools, formatResults } from "@toolgate/providers";
import type { ToolRegistry } from "@toolgate/registry";
import type { Logger } from "@toolgate/telemetry";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { CallWaiters } from "./call-waiters.js";
import type { HostSubmission } from "./host-calls.js";
import { HostCallConflictError } from "./host-call-keys.js";
import {
  keyedProviderCallId,
  MCP_IDEMPOTENCY_META,
  parseIdempotencyKey,
  principalScope,
  requestFingerprint,
  type HostIdempotency,
} from "./host-idempotency.js";
import { INVALID_CHARACTERS, unsafeKeys, unsafeToolName } from "./inbound-text.js";
import { MAX_TASK_TTL_MS, MCP_LOG_LEVELS, type McpLogLevel, type McpSession, type McpSessions, type McpTask } from "./mcp-sessions.js";
import { classifyFailure, withDeadline } from "./outage.js";
import { RunRequestError, type RunLoop } from "./run-loop.js";
import type { RunStore } from "./run-store.js";
import { provenanceOf } from "./transcript.js";
import type { AdmissionTicket } from "./admission.js";

/** How long one plain MCP `tools/call` waits for its call to end (or to wait for a human) before answering that it is still running. */
const CALL_WAIT_MS = 60_000;
/** How long one `tasks/result` waits in one slice before looking at whether its client is still there. */
const RESULT_SLICE_MS = 30_000;
/** A task's lifetime when the client asks for none (and the longest it may ask for). */
const DEFAULT_TASK_TTL_MS = MAX_TASK_TTL_MS;
/** The `pollInterval` tasks suggest. */
const POLL_INTERVAL_MS = 1_000;
/** Where a result names its runtime call id. */
export const CALL_ID_META = "io.toolgate/call_id";
/** Request headers an MCP client chooses its session's run and context with (at `initialize`). */
export const RUN_HEADER = "toolgate-run-id";
export const TASK_HEADER = "toolgate-task-id";

export interface McpFrontDoorDeps {
  loop: RunLoop;
  waiters: CallWaiters;
  /** The contracts in force now (the catalog: new versions arrive while running). */
  contracts: { registry(): ToolRegistry };
  store: RunStore;
  sessions: McpSessions;
  idempotency: HostIdempotency;
  /** Watches a call's events live (approval requests, progress). */
  bus: EventBus;
  subjects: SubjectCatalogue;
  /** Policy's approval page, named to a client whose call waits for a human. */
  approvalUrl?: string | undefined;
  /** Longest a call waits for its dependencies to accept it, and the retry delay an outage error names. */
  outage: { deadlineMs: number; retryAfterS: number };
  logger: Logger;
}

type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/** A call that waits for a human: its approval request as policy published it. */
interface ApprovalWaitView {
  approval_id: string;
  expires_at: string;
}

/** What a pending call is doing, as far as the front door can tell. */
type CallState = { kind: "ended"; result: ResultEnvelope } | { kind: "approval"; approval: ApprovalWaitView } | { kind: "running" };

/**
 * An MCP server (Streamable HTTP, official SDK) over the registry: any MCP host can list the tools and call
 * them, and every call goes through the same path as a model's — validation, policy, approval, the executor's
 * at-most-once execution — under the authenticated caller's identity.
 *
 * A session (`Mcp-Session-Id`, issued at `initialize`) is bound to one host-driven run and its context, which the
 * client chooses with `Toolgate-Run-Id` / `Toolgate-Task-Id`; any replica serves it. Within a session an identical
 * call (same tool and arguments, or the same `_meta["toolgate/idempotency-key"]`) is the same call: a retry joins
 * it. A call that waits for a human is a task (`tasks/get`, `tasks/result`, `tasks/cancel`), a URL elicitation
 * of the approval page, or an `APPROVAL_REQUIRED` result that says where to approve and how to get the outcome.
 */
export class McpFrontDoor {
  readonly #deps: McpFrontDoorDeps;
  /** A session's first submission on this replica, which may create its run: the others wait for it. */
  readonly #creating = new Map<string, Promise<unknown>>();
  readonly #createdRuns = new Set<string>();

  constructor(deps: McpFrontDoorDeps) {
    this.#deps = deps;
  }

  /** Serves one HTTP request of the MCP endpoint for `principal` (already authenticated, its Host and Origin checked). */
  async handle(principal: Principal, req: IncomingMessage, res: ServerResponse, body: unknown, admission?: AdmissionTicket): Promise<void> {
    let session: McpSession | undefined;
    let sessionIdGenerator: (() => string) | undefined;
    const initialize = initializeParams(body);
    if (initialize && req.method === "POST") {
      const started = await this.#startSession(principal, req, initialize);
      if ("refused" in started) return void sendJsonRpcError(res, 400, ErrorCode.InvalidParams, started.refused.message, started.refused.data);
      session = started.session;
      sessionIdGenerator = () => started.session._id;
    } else {
      const id = req.headers["mcp-session-id"];
      if (typeof id === "string") {
        session = await this.#deps.sessions.get(id, principal);
        // The protocol's answer to a session the server does not know: the client starts a new one.
        if (!session) return void sendJsonRpcError(res, 404, -32001, "Session not found");
      }
      if (req.method === "DELETE") {
        // The client ends its session: its id is unknown from then on (404), its tasks forgotten. Its calls are
        // not touched: they end as they would have, and their outcomes stay readable through the REST API.
        if (!session) return void sendJsonRpcError(res, 400, ErrorCode.InvalidRequest, "Bad Request: Mcp-Session-Id header is required");
        await this.#deps.sessions.end(session);
        this.#deps.logger.info({ session: session._id.slice(0, 12), run_id: session.run_id }, "MCP session ended");
        return void res.writeHead(204).end();
      }
    }
    const server = this.#server(principal, session, admission);
    // A transport per request (any replica serves a session): JSON answers, except for calls whose client asked for
    // progress or log messages, which stream them before their result.
    const transport = new StreamableHTTPServerTransport({
      ...(sessionIdGenerator ? { sessionIdGenerator } : {}),
      enableJsonResponse: !streamsProgress(body, session),
    });
    res.on("close", () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
  }

  /** A new session from an `initialize` request: its run (the one named, or a new one) and context. */
  async #startSession(
    principal: Principal,
    req: IncomingMessage,
    initialize: { capabilities: Record<string, unknown>; protocolVersion: string },
  ): Promise<{ session: McpSession } | { refused: { message: string; data: Record<string, unknown> } }> {
    const runHeader = header(req, RUN_HEADER);
    const taskHeader = header(req, TASK_HEADER);
    const context = RunContextSchema.safeParse(taskHeader === undefined ? {} : { task_id: taskHeader });
    if (!context.success) return { refused: { message: `${TASK_HEADER} must be 1-128 letters, digits, _ or -`, data: { code: "INVALID_REQUEST" } } };
    let runId = newRunId();
    let runContext: RunContext = context.data;
    if (runHeader !== undefined) {
      const run = /^run_[0-9A-Za-z]{1,64}$/.test(runHeader) ? await this.#deps.store.getRun(runHeader) : null;
      if (!run || run.principal.tenant !== principal.tenant || run.principal.subject !== principal.subject)
        return { refused: { message: "no such run", data: { code: "RUN_NOT_FOUND" } } };
      if (run.status !== "external") return { refused: { message: "this run is driven by Toolgate's own loop", data: { code: "RUN_NOT_EXTERNAL" } } };
      if (taskHeader !== undefined && run.context.task_id !== taskHeader)
        return { refused: { message: `the run's task is ${run.context.task_id ?? "none"}`, data: { code: "CONTEXT_MISMATCH" } } };
      runId = run._id;
      runContext = run.context;
      this.#createdRuns.add(runId);
    }
    const session = await this.#deps.sessions.start(principal, {
      runId,
      context: runContext,
      clientCapabilities: initialize.capabilities,
      protocolVersion: initialize.protocolVersion,
    });
    this.#deps.logger.info({ session: session._id.slice(0, 12), run_id: runId, task_id: runContext.task_id }, "MCP session started");
    return { session };
  }

  /** `admission`: the request's place, kept while a call is being submitted and given back before it is awaited. */
  #server(principal: Principal, session: McpSession | undefined, admission: AdmissionTicket | undefined): Server {
    const { contracts } = this.#deps;
    const server = new Server(
      { name: "toolgate", version: "1.0.0" },
      {
        capabilities: {
          tools: { listChanged: false },
          logging: {},
          tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } },
        },
      },
    );
    server.setRequestHandler(ListToolsRequestSchema, () => {
      const exported = exportTools(
        "mcp",
        contracts
          .registry()
          .list()
          .map((t) => t.contract),
      );
      if (!exported.ok) throw new Error(exported.error.message);
      // Any tool may run as a task: one that waits for a human is the reason tasks exist.
      return { tools: exported.tools.map((tool) => ({ ...tool, execution: { taskSupport: "optional" as const } })) };
    });
    server.setRequestHandler(SetLevelRequestSchema, async (request) => {
      const level = request.params.level;
      if (!MCP_LOG_LEVELS.includes(level)) throw new McpError(ErrorCode.InvalidParams, `level must be one of ${MCP_LOG_LEVELS.join(", ")}`);
      if (session) await this.#deps.sessions.setLogLevel(session, level);
      return {};
    });
    server.setRequestHandler(CallToolRequestSchema, (request, extra) => this.#call(principal, session, admission, request.params, extra));
    server.setRequestHandler(GetTaskRequestSchema, async (request) => {
      const task = await this.#task(principal, session, request.params.taskId);
      return await this.#taskView(task, session);
    });
    server.setRequestHandler(GetTaskPayloadRequestSchema, async (request, extra) => {
      const task = await this.#task(principal, session, request.params.taskId);
      return await this.#taskResult(task, session, extra);
    });
    server.setRequestHandler(CancelTaskRequestSchema, async (request) => {
      const task = await this.#task(principal, session, request.params.taskId);
      return await this.#cancel(principal, task, session);
    });
    server.setRequestHandler(ListTasksRequestSchema, async (request) => {
      if (request.params?.cursor !== undefined) throw new McpError(ErrorCode.InvalidParams, "unknown cursor");
      const tasks = await this.#deps.sessions.tasksOf(principal, session, 100);
      return { tasks: await Promise.all(tasks.map((t) => this.#taskView(t, session))) };
    });
    return server;
  }

  async #call(
    principal: Principal,
    session: McpSession | undefined,
    admission: AdmissionTicket | undefined,
    params: {
      name: string;
      arguments?: Record<string, unknown> | undefined;
      _meta?: Record<string, unknown> | undefined;
      task?: { ttl?: number | undefined } | undefined;
    },
    extra: Extra,
  ): Promise<CallToolResult | { task: Task; _meta?: Record<string, unknown> }> {
    const { waiters, outage } = this.#deps;
    // Refused before anything is recorded: neither the store nor the event stream could carry them.
    const unsafe = unsafeToolName(params.name, "/params/name") ?? unsafeKeys(params.arguments ?? {}, "/params/arguments");
    if (unsafe) throw new McpError(ErrorCode.InvalidParams, unsafe.message, { code: INVALID_CHARACTERS, pointer: unsafe.pointer });
    const argumentsJson = JSON.stringify(params.arguments ?? {});
    const parsed = parseIdempotencyKey(params._meta?.[MCP_IDEMPOTENCY_META]);
    if (!parsed.ok) throw new McpError(ErrorCode.InvalidParams, parsed.message, { code: "INVALID_IDEMPOTENCY_KEY" });
    const scope = principalScope(principal);
    // A keyed call has an id derived from its key; in a session, an unkeyed call one derived from the call itself,
    // so that a retry of it is the same call (provider call ids are natural keys within a run).
    const id =
      parsed.key !== undefined
        ? keyedProviderCallId(scope, parsed.key)
        : session
          ? `mcp_${createHash("sha256")
              .update(`${session._id}\n${canonicalJson({ name: params.name, arguments: params.arguments ?? {} })}`)
              .digest("hex")
              .slice(0, 40)}`
          : `mcp_${randomUUID()}`;
    const submission: HostSubmission = {
      context: session?.context ?? {},
      calls: [{ id, name: params.name, arguments: argumentsJson }],
      ...(session ? { pinnedRunId: session.run_id, pinnedBefore: true } : {}),
    };
    const progress = new CallProgress(extra, session, params._meta?.progressToken);
    let callId: CallId;
    let ended: ReadonlyMap<CallId, ResultEnvelope> = new Map();
    let waiting: ReturnType<CallWaiters["register"]> | undefined;
    let watch: CallWatch | undefined;
    const listen = (ids: CallId[], done?: ReadonlyMap<CallId, ResultEnvelope>) => {
      ended = done ?? ended;
      const open = ids.filter((i) => !ended.has(i));
      waiting = waiters.register(open);
      if (ids[0]) progress.accepted(ids[0], params.name);
      // Listening before anything is published: the approval request of a new call is not missed.
      if (open[0]) watch = new CallWatch(this.#deps.bus, this.#deps.subjects, open[0], (event) => progress.event(event));
    };
    try {
      if (parsed.key !== undefined) {
        const fingerprint = requestFingerprint("MCP tools/call", { name: params.name, arguments: params.arguments ?? {} });
        const decision = await this.#deps.idempotency.beginWithin(
          { scope, key: parsed.key, route: "MCP tools/call", fingerprint, runId: session?.run_id ?? newRunId() },
          outage.deadlineMs,
          (begun) => admission?.hold(begun),
        );
        if (decision.kind === "mismatch") {
          throw new McpError(ErrorCode.InvalidParams, "this idempotency key was already used for another call", { code: "IDEMPOTENCY_KEY_REUSED" });
        }
        if (decision.kind === "in_flight") {
          throw new McpError(ErrorCode.InvalidRequest, "the first call with this idempotency key is still being submitted; retry later", {
            code: "IDEMPOTENCY_KEY_IN_FLIGHT",
            retry_after_s: decision.retryAfterS,
          });
        }
        if (decision.kind === "replay") {
          const original = decision.record.call_ids?.[0];
          if (!original) throw new McpError(ErrorCode.InvalidRequest, "the first call with this key was refused", { code: "IDEMPOTENCY_KEY_REUSED" });
          admission?.release();
          listen([original]);
          callId = original;
        } else {
          if (decision.record.run_id) submission.pinnedRunId = decision.record.run_id;
          submission.pinnedBefore = session !== undefined || decision.takenOver;
          const record = decision.record;
          const work = this.#submit(principal, session, submission, listen);
          admission?.hold(work);
          this.#deps.idempotency.hold(record, work);
          this.#deps.idempotency.submitting(record, work);
          work.then(
            (ids) => this.#deps.idempotency.submitted(record, ids),
            () => this.#deps.idempotency.fail(record),
          );
          callId = (await withDeadline(work, outage.deadlineMs, "submitting the call")).callIds[0]!;
        }
      } else {
        const work = this.#submit(principal, session, submission, listen);
        admission?.hold(work);
        callId = (await withDeadline(work, outage.deadlineMs, "submitting the call")).callIds[0]!;
      }
    } catch (error) {
      void waiting?.wait(0);
      watch?.close();
      if (error instanceof McpError) throw error;
      if (error instanceof HostCallConflictError)
        throw new McpError(ErrorCode.InvalidParams, "this idempotency key was already used for another call", { code: "IDEMPOTENCY_KEY_REUSED" });
      if (error instanceof RunRequestError) throw new McpError(ErrorCode.InvalidParams, error.message, { code: error.code });
      const failed = classifyFailure(error);
      if (failed.kind !== "unavailable") throw error;
      this.#deps.logger.warn({ err: error, dependency: failed.dependency }, "MCP call refused: dependency unavailable");
      throw new McpError(ErrorCode.InternalError, "Toolgate cannot take calls now; retry later", { code: "UNAVAILABLE", retry_after_s: outage.retryAfterS });
    }
    admission?.release();

    if (params.task) {
      void waiting?.wait(0);
      watch?.close();
      const ttl = Math.min(params.task.ttl ?? DEFAULT_TASK_TTL_MS, DEFAULT_TASK_TTL_MS);
      const createdAt = new Date();
      const task = await this.#deps.sessions.recordTask({
        _id: callId,
        session_id: session?._id ?? null,
        tenant: principal.tenant,
        subject: principal.subject,
        created_at: createdAt,
        ttl_ms: ttl,
        expires_at: new Date(createdAt.getTime() + ttl),
      });
      const view = await this.#taskView(task, session);
      return {
        task: view,
        _meta: {
          [CALL_ID_META]: callId,
          "io.modelcontextprotocol/model-immediate-response": `Toolgate accepted the call as task ${callId}; its result follows when it ends.`,
        },
      };
    }

    try {
      const state = ended.get(callId) ? ({ kind: "ended", result: ended.get(callId)! } as const) : await this.#until(callId, waiting!, watch!, CALL_WAIT_MS);
      if (state.kind === "ended") {
        progress.ended(state.result);
        return this.#format(callId, id, params.name, argumentsJson, state.result);
      }
      if (state.kind === "approval") {
        const url = this.#approvalLink(callId, state.approval.approval_id);
        progress.log("notice", `call ${callId} waits for a human approval (${state.approval.approval_id})`);
        if (supportsUrlElicitation(session) && url) {
          throw new UrlElicitationRequiredError(
            [{ mode: "url", elicitationId: state.approval.approval_id, url, message: approvalMessage(params.name, state.approval) }],
            `an approver must approve this ${params.name} call first; retry the same call in this session once they have`,
          );
        }
        return this.#approvalRequired(callId, params.name, state.approval, url);
      }
      throw new McpError(-32001, "the call is still running; call again with the same arguments in this session to join it", {
        code: "CALL_PENDING",
        call_id: callId,
        status: "running",
        result_url: `/v1/tool-calls/${callId}?wait_ms=60000`,
      });
    } finally {
      watch?.close();
    }
  }

  /** Submits into a session's run; the first submission on this replica (which may create the run) goes alone. */
  async #submit(
    principal: Principal,
    session: McpSession | undefined,
    submission: HostSubmission,
    listen: (ids: CallId[], done?: ReadonlyMap<CallId, ResultEnvelope>) => void,
  ): Promise<{ runId: string; callIds: CallId[] }> {
    const runId = submission.pinnedRunId;
    if (!session || runId === undefined || this.#createdRuns.has(runId)) return this.#deps.loop.submitCalls(principal, submission, listen);
    const before = this.#creating.get(runId);
    if (before) {
      await before.catch(() => undefined);
      return this.#deps.loop.submitCalls(principal, submission, listen);
    }
    const work = this.#deps.loop.submitCalls(principal, submission, listen);
    this.#creating.set(runId, work);
    try {
      const submitted = await work;
      this.#createdRuns.add(runId);
      return submitted;
    } finally {
      this.#creating.delete(runId);
    }
  }

  /** Waits until the call ends or waits for a human, or `timeoutMs` passes. */
  async #until(callId: CallId, waiting: ReturnType<CallWaiters["register"]>, watch: CallWatch, timeoutMs: number): Promise<CallState> {
    // A call that asked for approval before this request (a retry joining it) has its wait on record.
    const stored = this.#storedApproval(callId).then((approval) => approval && ({ kind: "approval", approval } as const));
    const approval = Promise.race([
      watch.approval.then((a) => ({ kind: "approval", approval: a }) as const),
      stored.then((s) => s ?? new Promise<never>(() => undefined)),
    ]);
    const result = waiting.wait(timeoutMs).then((results) => {
      const r = results.get(callId);
      return r ? ({ kind: "ended", result: r } as const) : ({ kind: "running" } as const);
    });
    const first = await Promise.race([result, approval]);
    if (first.kind === "approval") {
      // The result may have arrived together with the approval's record (an approval granted meanwhile).
      const now = await this.#deps.waiters.storedResult(callId);
      if (now) return { kind: "ended", result: now.result };
      void result;
    }
    return first;
  }

  /**
   * The approval `callId` asked for, if it did: the wait the orchestrator recorded, or else the request in the
   * stream. A wait is recorded when a replica consumes the request, which can be after a client that was told
   * APPROVAL_REQUIRED calls again to join the call; its watch started after the request went by, so without the
   * stream it would wait for the whole call instead of answering at once.
   */
  async #storedApproval(callId: CallId): Promise<ApprovalWaitView | undefined> {
    const wait = await this.#deps.store.approvalWaits.findOne({ _id: callId });
    if (wait) return { approval_id: wait.approval_id, expires_at: wait.expires_at.toISOString() };
    // Unreadable stream: the watch and the call's end still answer.
    const requested = await this.#deps.bus.lastEvent("call", callId, "approval_requested").catch(() => undefined);
    return requested?.kind === "call" && requested.type === "approval_requested"
      ? { approval_id: requested.payload.approval_id, expires_at: requested.payload.expires_at }
      : undefined;
  }

  /** What the call's state is now: ended, waiting for a human, or running. */
  async #state(callId: CallId): Promise<CallState> {
    const stored = await this.#deps.waiters.storedResult(callId);
    if (stored) return { kind: "ended", result: stored.result };
    const approval = await this.#storedApproval(callId);
    return approval ? { kind: "approval", approval } : { kind: "running" };
  }

  async #task(principal: Principal, session: McpSession | undefined, taskId: string): Promise<McpTask> {
    const task = await this.#deps.sessions.task(taskId, principal, session);
    if (!task || task.created_at.getTime() + task.ttl_ms <= Date.now()) throw new McpError(ErrorCode.InvalidParams, "Failed to retrieve task: Task not found");
    return task;
  }

  async #taskView(task: McpTask, session: McpSession | undefined): Promise<Task> {
    const state = await this.#state(task._id);
    const base = { taskId: task._id, createdAt: task.created_at.toISOString(), ttl: task.ttl_ms, pollInterval: POLL_INTERVAL_MS };
    if (task.cancelled_at) {
      // It stays cancelled (the protocol says so) whatever its call did next; the message says what that was.
      const after = state.kind === "ended" ? `; the call ended ${state.result.ok ? "ok" : state.result.error.code}` : "";
      return { ...base, status: "cancelled", statusMessage: `cancelled by the client${after}`, lastUpdatedAt: task.cancelled_at.toISOString() };
    }
    if (state.kind === "ended") {
      return {
        ...base,
        status: state.result.ok ? "completed" : "failed",
        ...(state.result.ok ? {} : { statusMessage: `${state.result.error.code}: ${state.result.error.message}` }),
        lastUpdatedAt: new Date().toISOString(),
      };
    }
    if (state.kind === "approval") {
      const url = this.#approvalLink(task._id, state.approval.approval_id);
      return {
        ...base,
        // With URL elicitation, tasks/result delivers the approval page's link: the client should call it.
        status: supportsUrlElicitation(session) && url ? "input_required" : "working",
        statusMessage: `waiting for a human approval (${state.approval.approval_id}, until ${state.approval.expires_at})${url ? ` at ${url}` : ""}`,
        lastUpdatedAt: new Date().toISOString(),
      };
    }
    return { ...base, status: "working", statusMessage: "the call is running", lastUpdatedAt: new Date().toISOString() };
  }

  /** `tasks/result`: the call's result once it ends, however long that takes (while the client waits). */
  async #taskResult(task: McpTask, session: McpSession | undefined, extra: Extra): Promise<CallToolResult> {
    const related = { [RELATED_TASK_META_KEY]: { taskId: task._id } };
    let elicited = false;
    for (;;) {
      const waiting = this.#deps.waiters.register([task._id], { storedFirst: true });
      const state = await this.#state(task._id);
      if (state.kind === "ended") {
        void waiting.wait(0);
        const call = await this.#deps.loop.findCall(task._id);
        const formatted = this.#format(task._id, call?.provider_call_id ?? task._id, call?.tool_name ?? "", call?.arguments_json ?? "{}", state.result);
        return { ...formatted, _meta: { ...formatted._meta, ...related } };
      }
      const url = state.kind === "approval" ? this.#approvalLink(task._id, state.approval.approval_id) : undefined;
      if (state.kind === "approval" && !elicited && url && supportsUrlElicitation(session)) {
        elicited = true;
        // The client's answer (that the user went to the page, or not) changes nothing: the approver's decision
        // does. It may arrive at any replica, so nothing here waits for it.
        void extra
          .sendRequest(
            {
              method: "elicitation/create",
              params: { mode: "url", elicitationId: state.approval.approval_id, url, message: approvalMessage("this", state.approval), _meta: related },
            },
            z_any,
          )
          .catch(() => undefined);
      }
      const results = await waiting.wait(RESULT_SLICE_MS);
      if (extra.signal.aborted) throw new McpError(ErrorCode.InvalidRequest, "request cancelled");
      if (results.size === 0) continue;
    }
  }

  async #cancel(principal: Principal, task: McpTask, session: McpSession | undefined): Promise<Task> {
    const view = await this.#taskView(task, session);
    if (view.status === "completed" || view.status === "failed" || view.status === "cancelled")
      throw new McpError(ErrorCode.InvalidParams, `Cannot cancel task in terminal status: ${view.status}`);
    // Asked before the task is marked: a retry of a cancel that failed here asks again rather than finding the
    // task cancelled and its approval request still open.
    await this.#requestCancel(task._id);
    const cancelled = await this.#deps.sessions.cancelTask(task);
    this.#deps.logger.info({ call_id: task._id, tenant: principal.tenant, subject: principal.subject }, "MCP task cancelled");
    return await this.#taskView(cancelled, session);
  }

  /**
   * Publishes the call's `cancel_requested`. The orchestrator owns calls and policy owns approval requests: policy
   * withdraws the call's request if it is still open (the call then ends APPROVAL_DENIED and never runs); a call
   * already authorized or running is not stopped and ends as it would have (its effect is at most once either way).
   */
  async #requestCancel(callId: CallId): Promise<void> {
    const call = await this.#deps.loop.findCall(callId);
    const run = call ? await this.#deps.store.getRun(call.run_id) : null;
    if (!call || !run) return;
    const waits = (await this.#storedApproval(callId)) !== undefined;
    await this.#deps.bus.publish(
      nextCallEvent(
        // The event it follows: the call's proposal (seq 1) or, when it waits for a human, its approval request.
        { call_id: callId, run_id: call.run_id, principal: run.principal, seq: waits ? 2 : 1 },
        "cancel_requested",
        "orchestrator",
        { reason: `the caller cancelled MCP task ${callId}` },
      ),
    );
  }

  /** A plain client's answer while its call waits for a human: where to approve, and how to get the outcome. */
  #approvalRequired(callId: CallId, name: string, approval: ApprovalWaitView, url: string | undefined): CallToolResult {
    const envelope = failure(
      callId,
      "APPROVAL_REQUIRED",
      `a human must approve this ${name} call before it runs${url ? `, at ${url}` : " (policy's approval page)"}; then call ${name} again with the same arguments in this session to get its outcome`,
      {
        retryable: true,
        details: {
          approval_id: approval.approval_id,
          expires_at: approval.expires_at,
          ...(url ? { approval_url: url } : {}),
          retry: "the same tool and arguments in this session join this call (it is never run twice)",
          result_url: `/v1/tool-calls/${callId}?wait_ms=60000`,
        },
      },
    );
    return { content: [{ type: "text", text: JSON.stringify(envelope) }], isError: true, _meta: { [CALL_ID_META]: callId } };
  }

  #approvalLink(callId: CallId, approvalId: string): string | undefined {
    const base = this.#deps.approvalUrl;
    if (!base) return undefined;
    const url = new URL(base);
    url.searchParams.set("approval_id", approvalId);
    url.searchParams.set("call_id", callId);
    return url.toString();
  }

  #format(callId: CallId, id: string, name: string, argumentsJson: string, result: ResultEnvelope): CallToolResult {
    const formatted = formatResults("mcp", [{ id, name, argumentsJson }], [{ id, result, provenance: provenanceOf(name, this.#deps.contracts.registry()) }]);
    if (!formatted.ok) throw new Error(formatted.error.message);
    const answer = formatted.output[0]!.result;
    return { ...answer, _meta: { ...answer._meta, [CALL_ID_META]: callId } };
  }
}

/** Any result: the answer to an elicitation is not read (see `#taskResult`). */
const z_any = { "~standard": undefined, parse: (v: unknown) => v, safeParse: (v: unknown) => ({ success: true, data: v }) } as never;

/** Follows one call's events live: its approval request, and each step for progress notifications. */
class CallWatch {
  readonly approval: Promise<ApprovalWaitView>;
  readonly #subscription: Subscription;

  constructor(bus: EventBus, subjects: SubjectCatalogue, callId: CallId, onEvent: (event: ToolgateEvent) => void) {
    let found: (approval: ApprovalWaitView) => void = () => undefined;
    this.approval = new Promise((resolve) => (found = resolve));
    const prefix = subjects.callEvents("proposed").split(".call.")[0]!;
    this.#subscription = bus.watch(
      `${prefix}.call.${callId}.*`,
      () => true,
      (event) => {
        if (event.kind !== "call" || event.call_id !== callId) return;
        onEvent(event);
        if (event.type === "approval_requested") found({ approval_id: event.payload.approval_id, expires_at: event.payload.expires_at });
      },
    );
  }

  close(): void {
    this.#subscription.unsubscribe();
  }
}

/** A call's progress notifications (with a progress token) and log messages (at the session's level). */
class CallProgress {
  #step = 0;
  readonly #extra: Extra;
  readonly #level: number;
  readonly #token: string | number | undefined;
  #callId: CallId | undefined;

  constructor(extra: Extra, session: McpSession | undefined, token: unknown) {
    this.#extra = extra;
    this.#level = MCP_LOG_LEVELS.indexOf(session?.log_level ?? "info");
    this.#token = typeof token === "string" || typeof token === "number" ? token : undefined;
  }

  accepted(callId: CallId, name: string): void {
    this.#callId = callId;
    this.#notify(`call ${callId} (${name}) accepted`);
  }

  event(event: ToolgateEvent): void {
    if (event.type === "result_attached") return;
    this.#notify(`call ${this.#callId ?? ""}: ${event.type.replaceAll("_", " ")}`);
  }

  ended(result: ResultEnvelope): void {
    this.#notify(`call ${this.#callId ?? ""} ended: ${result.ok ? "ok" : result.error.code}`, true);
  }

  log(level: McpLogLevel, message: string): void {
    if (MCP_LOG_LEVELS.indexOf(level) < this.#level) return;
    void this.#extra.sendNotification({ method: "notifications/message", params: { level, logger: "toolgate", data: message } }).catch(() => undefined);
  }

  #notify(message: string, last = false): void {
    this.#step += 1;
    if (this.#token !== undefined) {
      void this.#extra
        .sendNotification({
          method: "notifications/progress",
          params: { progressToken: this.#token, progress: this.#step, ...(last ? { total: this.#step } : {}), message },
        })
        .catch(() => undefined);
    }
    this.log("info", message);
  }
}

function approvalMessage(name: string, approval: ApprovalWaitView): string {
  return `Toolgate holds ${name === "this" ? "this" : `this ${name}`} call for a human approval (${approval.approval_id}, until ${approval.expires_at}). Open the approval page to have an approver decide.`;
}

function supportsUrlElicitation(session: McpSession | undefined): boolean {
  const elicitation = session?.client_capabilities.elicitation;
  return typeof elicitation === "object" && elicitation !== null && "url" in elicitation;
}

function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return typeof value === "string" && value.length > 0 ? value : undefined;
}

/** The params of an `initialize` request (a single message), or undefined. */
function initializeParams(body: unknown): { capabilities: Record<string, unknown>; protocolVersion: string } | undefined {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return undefined;
  const message = body as { method?: unknown; params?: { capabilities?: unknown; protocolVersion?: unknown } };
  if (message.method !== "initialize") return undefined;
  const capabilities = message.params?.capabilities;
  return {
    capabilities: typeof capabilities === "object" && capabilities !== null ? (capabilities as Record<string, unknown>) : {},
    protocolVersion: typeof message.params?.protocolVersion === "string" ? message.params.protocolVersion : "",
  };
}

/**
 * Whether a POST carries a request with something to send before its answer: a call whose client asked for
 * progress or set a log level, or a task's result that may carry a URL elicitation. Anything else is plain JSON.
 */
function streamsProgress(body: unknown, session: McpSession | undefined): boolean {
  const messages: unknown[] = Array.isArray(body) ? body : [body];
  return messages.some((m) => {
    if (typeof m !== "object" || m === null) return false;
    const { method, params } = m as { method?: unknown; params?: { _meta?: { progressToken?: unknown } } };
    if (method === "tools/call") return params?._meta?.progressToken !== undefined || session?.log_level !== undefined;
    return method === "tasks/result" && supportsUrlElicitation(session);
  });
}

function sendJsonRpcError(res: ServerResponse, status: number, code: number, message: string, data?: Record<string, unknown>): void {
  res
    .writeHead(status, { "content-type": "application/json" })
    .end(JSON.stringify({ jsonrpc: "2.0", error: { code, message, ...(data ? { data } : {}) }, id: null }));
}
