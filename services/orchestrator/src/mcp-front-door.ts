import { randomUUID } from "node:crypto";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { failure, newRunId, type CallId, type Principal, type ResultEnvelope } from "@toolgate/contracts";
import { exportTools, formatResults } from "@toolgate/providers";
import type { ToolRegistry } from "@toolgate/registry";
import type { Logger } from "@toolgate/telemetry";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { CallWaiters } from "./call-waiters.js";
import type { HostSubmission } from "./host-calls.js";
import {
  keyedProviderCallId,
  MCP_IDEMPOTENCY_META,
  parseIdempotencyKey,
  principalScope,
  requestFingerprint,
  type HostIdempotency,
} from "./host-idempotency.js";
import { INVALID_CHARACTERS, unsafeKeys, unsafeToolName } from "./inbound-text.js";
import { classifyFailure, withDeadline } from "./outage.js";
import type { RunStore } from "./run-store.js";
import type { RunLoop } from "./run-loop.js";
import { provenanceOf } from "./transcript.js";
import type { AdmissionTicket } from "./admission.js";

/** How long one MCP `tools/call` waits for its call to end before answering that it is still running. */
const CALL_WAIT_MS = 60_000;

export interface McpFrontDoorDeps {
  loop: RunLoop;
  waiters: CallWaiters;
  /** The contracts in force now (the catalog: new versions arrive while running). */
  contracts: { registry(): ToolRegistry };
  store: RunStore;
  idempotency: HostIdempotency;
  /** Longest a call waits for its dependencies to accept it, and the retry delay an outage error names. */
  outage: { deadlineMs: number; retryAfterS: number };
  logger: Logger;
}

/**
 * An MCP server (Streamable HTTP, stateless, official SDK) over the registry: any MCP host can list the
 * tools and call them, and every call goes through the same path as a model's — validation, policy,
 * approval, the executor's at-most-once execution — under the authenticated caller's identity. A call carrying
 * `_meta["toolgate/idempotency-key"]` is the same call when retried (see the README, "Idempotency and retries").
 */
export class McpFrontDoor {
  readonly #deps: McpFrontDoorDeps;

  constructor(deps: McpFrontDoorDeps) {
    this.#deps = deps;
  }

  /** Serves one HTTP request of the MCP endpoint for `principal` (already authenticated). */
  async handle(principal: Principal, req: IncomingMessage, res: ServerResponse, body: unknown, admission?: AdmissionTicket): Promise<void> {
    const server = this.#server(principal, admission);
    // Stateless: a transport per request, JSON responses, no session to resume.
    const transport = new StreamableHTTPServerTransport({ enableJsonResponse: true });
    res.on("close", () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
  }

  /** `admission`: the request's place, kept while a call is being submitted and given back before it is awaited. */
  #server(principal: Principal, admission: AdmissionTicket | undefined): Server {
    const { contracts, loop, waiters, outage } = this.#deps;
    const server = new Server({ name: "toolgate", version: "1.0.0" }, { capabilities: { tools: { listChanged: false } } });
    server.setRequestHandler(ListToolsRequestSchema, () => {
      const exported = exportTools(
        "mcp",
        contracts
          .registry()
          .list()
          .map((t) => t.contract),
      );
      if (!exported.ok) throw new Error(exported.error.message);
      return { tools: exported.tools };
    });
    server.setRequestHandler(CallToolRequestSchema, async (request): Promise<CallToolResult> => {
      // Refused before anything is recorded: neither the store nor the event stream could carry them.
      const unsafe = unsafeToolName(request.params.name, "/params/name") ?? unsafeKeys(request.params.arguments ?? {}, "/params/arguments");
      if (unsafe) throw new McpError(ErrorCode.InvalidParams, unsafe.message, { code: INVALID_CHARACTERS, pointer: unsafe.pointer });
      const argumentsJson = JSON.stringify(request.params.arguments ?? {});
      const parsed = parseIdempotencyKey(request.params._meta?.[MCP_IDEMPOTENCY_META]);
      if (!parsed.ok) throw new McpError(ErrorCode.InvalidParams, parsed.message, { code: "INVALID_IDEMPOTENCY_KEY" });
      const scope = principalScope(principal);
      // A keyed call has an id derived from its key, in a run fixed at the key's claim: a retry is the same call.
      const id = parsed.key === undefined ? `mcp_${randomUUID()}` : keyedProviderCallId(scope, parsed.key);
      const submission: HostSubmission = { context: {}, calls: [{ id, name: request.params.name, arguments: argumentsJson }] };
      let callId: CallId;
      let ended: ReadonlyMap<CallId, ResultEnvelope> = new Map();
      let waiting: ReturnType<CallWaiters["register"]> | undefined;
      try {
        if (parsed.key !== undefined) {
          const fingerprint = requestFingerprint("MCP tools/call", { name: request.params.name, arguments: request.params.arguments ?? {} });
          const decision = await this.#deps.idempotency.beginWithin(
            { scope, key: parsed.key, route: "MCP tools/call", fingerprint, runId: newRunId() },
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
            if (!decision.record.call_ids?.[0])
              throw new McpError(ErrorCode.InvalidRequest, "the first call with this key was refused", { code: "IDEMPOTENCY_KEY_REUSED" });
            admission?.release();
            return await this.#answer(decision.record.call_ids[0], id, request.params.name, argumentsJson);
          }
          if (decision.record.run_id) submission.pinnedRunId = decision.record.run_id;
          submission.pinnedBefore = decision.takenOver;
          const record = decision.record;
          const work = loop.submitCalls(principal, submission, (ids: CallId[], done?: ReadonlyMap<CallId, ResultEnvelope>) => {
            ended = done ?? ended;
            waiting = waiters.register(ids.filter((i) => !ended.has(i)));
          });
          admission?.hold(work);
          this.#deps.idempotency.hold(record, work);
          this.#deps.idempotency.submitting(record, work);
          work.then(
            (ids) => this.#deps.idempotency.submitted(record, ids),
            () => this.#deps.idempotency.fail(record),
          );
          callId = (await withDeadline(work, outage.deadlineMs, "submitting the call")).callIds[0]!;
        } else {
          const work = loop.submitCalls(principal, submission, (ids) => (waiting = waiters.register(ids)));
          admission?.hold(work);
          callId = (await withDeadline(work, outage.deadlineMs, "submitting the call")).callIds[0]!;
        }
      } catch (error) {
        if (error instanceof McpError) throw error;
        const failed = classifyFailure(error);
        if (failed.kind !== "unavailable") throw error;
        this.#deps.logger.warn({ err: error, dependency: failed.dependency }, "MCP call refused: dependency unavailable");
        throw new McpError(ErrorCode.InternalError, "Toolgate cannot take calls now; retry later", { code: "UNAVAILABLE", retry_after_s: outage.retryAfterS });
      }
      admission?.release();
      const result = ended.get(callId) ?? (await waiting!.wait(CALL_WAIT_MS)).get(callId);
      return this.#format(callId, id, request.params.name, argumentsJson, result);
    });
    return server;
  }

  /** The answer to a retried keyed call: the original call's result once it ends (or that it is still running). */
  async #answer(callId: CallId, id: string, name: string, argumentsJson: string): Promise<CallToolResult> {
    const stored = await this.#deps.store.getResult(callId);
    if (stored) return this.#format(callId, id, name, argumentsJson, stored.result);
    const waiting = this.#deps.waiters.register([callId]);
    const again = await this.#deps.store.getResult(callId);
    const result = (await waiting.wait(again ? 0 : CALL_WAIT_MS)).get(callId) ?? again?.result;
    return this.#format(callId, id, name, argumentsJson, result);
  }

  #format(callId: CallId, id: string, name: string, argumentsJson: string, result: ResultEnvelope | undefined): CallToolResult {
    if (!result) {
      const pending = failure(callId, "OUTCOME_UNKNOWN", `the call is still running or waiting for approval; read it with GET /v1/tool-calls/${callId}`, {
        retryable: false,
      });
      return { content: [{ type: "text", text: JSON.stringify(pending) }], isError: true };
    }
    const formatted = formatResults("mcp", [{ id, name, argumentsJson }], [{ id, result, provenance: provenanceOf(name, this.#deps.contracts.registry()) }]);
    if (!formatted.ok) throw new Error(formatted.error.message);
    return formatted.output[0]!.result;
  }
}
