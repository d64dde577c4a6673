import { randomUUID } from "node:crypto";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { CallToolRequestSchema, ListToolsRequestSchema, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { failure, type Principal } from "@toolgate/contracts";
import { exportTools, formatResults } from "@toolgate/providers";
import type { ToolRegistry } from "@toolgate/registry";
import type { Logger } from "@toolgate/telemetry";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { CallWaiters } from "./call-waiters.js";
import type { RunLoop } from "./run-loop.js";
import { provenanceOf } from "./transcript.js";

/** How long one MCP `tools/call` waits for its call to end before answering that it is still running. */
const CALL_WAIT_MS = 60_000;

export interface McpFrontDoorDeps {
  loop: RunLoop;
  waiters: CallWaiters;
  /** The contracts in force now (the catalog: new versions arrive while running). */
  contracts: { registry(): ToolRegistry };
  logger: Logger;
}

/**
 * An MCP server (Streamable HTTP, stateless, official SDK) over the registry: any MCP host can list the
 * tools and call them, and every call goes through the same path as a model's — validation, policy,
 * approval, the executor's at-most-once execution — under the authenticated caller's identity.
 */
export class McpFrontDoor {
  readonly #deps: McpFrontDoorDeps;

  constructor(deps: McpFrontDoorDeps) {
    this.#deps = deps;
  }

  /** Serves one HTTP request of the MCP endpoint for `principal` (already authenticated). */
  async handle(principal: Principal, req: IncomingMessage, res: ServerResponse, body: unknown): Promise<void> {
    const server = this.#server(principal);
    // Stateless: a transport per request, JSON responses, no session to resume.
    const transport = new StreamableHTTPServerTransport({ enableJsonResponse: true });
    res.on("close", () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
  }

  #server(principal: Principal): Server {
    const { contracts, loop, waiters } = this.#deps;
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
      const id = `mcp_${randomUUID()}`;
      const argumentsJson = JSON.stringify(request.params.arguments ?? {});
      let waiting: ReturnType<CallWaiters["register"]> | undefined;
      const { callIds } = await loop.submitCalls(principal, { context: {}, calls: [{ id, name: request.params.name, arguments: argumentsJson }] }, (ids) => {
        waiting = waiters.register(ids);
      });
      const callId = callIds[0]!;
      const result = (await waiting!.wait(CALL_WAIT_MS)).get(callId);
      if (!result) {
        const pending = failure(callId, "OUTCOME_UNKNOWN", `the call is still running or waiting for approval; read it with GET /v1/tool-calls/${callId}`, {
          retryable: false,
        });
        return { content: [{ type: "text", text: JSON.stringify(pending) }], isError: true };
      }
      const formatted = formatResults(
        "mcp",
        [{ id, name: request.params.name, argumentsJson }],
        [{ id, result, provenance: provenanceOf(request.params.name, contracts.registry()) }],
      );
      if (!formatted.ok) throw new Error(formatted.error.message);
      return formatted.output[0]!.result;
    });
    return server;
  }
}
