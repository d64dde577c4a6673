import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { getDefaultEnvironment, StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { ErrorCode, McpError, type Tool } from "@modelcontextprotocol/sdk/types.js";
import { canonicalHash, type JsonValue } from "@toolgate/contracts";
import { writes, type ToolContext, type ToolContract } from "@toolgate/registry";
import type { Logger } from "@toolgate/telemetry";
import type { McpServerConfig } from "../config.js";
import { requestIdOf, type ToolAnswer } from "../run-tool.js";
import { mcpDefinitionHash } from "@toolgate/registry";

const CONNECT_TIMEOUT_MS = 10_000;
const RECONNECT_MIN_MS = 500;
const RECONNECT_MAX_MS = 30_000;
/** Largest message accepted from a stdio server: bounds memory whatever the server sends. */
const STDIO_MAX_BUFFER_BYTES = 8 * 1024 * 1024;

/** Why a server's tools may not run. */
export interface Quarantine {
  tool: string;
  expected: string;
  /** The hash the server presented, or `missing` when the tool disappeared. */
  observed: string;
  at: Date;
}

export interface McpTransportOptions {
  /** The allow-list: servers the executor may talk to, with how to reach them. */
  servers: Readonly<Record<string, McpServerConfig>>;
  /** Every MCP contract the executor serves: they say which tools of which server are used, and pin them. */
  contracts: readonly ToolContract[];
  recheckMs: number;
  logger: Logger;
  /** Told once when a server is quarantined (for operators' records). */
  onQuarantine?: (server: string, quarantine: Quarantine) => void;
}

/** One allowed server: its connection, the pinned definitions of the tools contracts use, its quarantine. */
class ServerLink {
  client: Client | undefined;
  connecting: Promise<Client> | undefined;
  quarantine: Quarantine | undefined;
  failures = 0;
  nextAttemptAt = 0;

  constructor(
    readonly name: string,
    readonly config: McpServerConfig,
    /** tool name → pinned hash */
    readonly pins: Map<string, string>,
  ) {}
}

/**
 * Runs tools on MCP servers through the official SDK client (stdio or Streamable HTTP). Only servers on the
 * allow-list are contacted and only tools a contract names are called, and only while the server presents the
 * tool definitions the contracts pinned: a definition that changes (seen at connect, on `list_changed`, or by
 * the periodic re-check) quarantines the whole server until a contract version approves the new definition.
 * Pins follow the contract catalog ({@link approve}): the current version of each MCP contract is the approved
 * definition, and a call validated against an older version's definition is refused.
 */
export class McpTransport {
  readonly #links = new Map<string, ServerLink>();
  readonly #log: Logger;
  readonly #options: McpTransportOptions;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(options: McpTransportOptions) {
    this.#options = options;
    this.#log = options.logger.child({ component: "mcp" });
    const pins = new Map<string, Map<string, string>>();
    for (const contract of options.contracts) {
      if (contract.transport.kind !== "mcp" || contract.transport.definition_hash === undefined) continue;
      const byTool = pins.get(contract.transport.server) ?? new Map<string, string>();
      byTool.set(contract.transport.tool, contract.transport.definition_hash);
      pins.set(contract.transport.server, byTool);
    }
    for (const [name, config] of Object.entries(options.servers)) {
      const serverPins = pins.get(name);
      if (serverPins) this.#links.set(name, new ServerLink(name, config, serverPins));
    }
  }

  /** Connects to every allowed server some contract uses; a server that is down is retried later, not fatal. */
  async start(): Promise<void> {
    await Promise.all([...this.#links.values()].map((link) => this.#connect(link).catch(() => undefined)));
    this.#timer = setInterval(() => void this.#recheckAll(), this.#options.recheckMs);
    this.#timer.unref();
  }

  /** Why the contract's tool may not run now (not allowed, not pinned, quarantined), or undefined when it may. */
  refusal(contract: ToolContract): string | undefined {
    if (contract.transport.kind !== "mcp") return "not an MCP tool";
    const { server, tool, definition_hash: pin } = contract.transport;
    if (pin === undefined) return `${server}/${tool} has no approved definition hash`;
    const link = this.#links.get(server);
    if (!link) return `MCP server ${server} is not on this executor's allow-list`;
    if (link.quarantine) return `MCP server ${server} is quarantined: the definition of ${link.quarantine.tool} changed`;
    if (link.pins.get(tool) !== pin) return `${server}/${tool}: ${contract.name}@${contract.version} pins a definition that is no longer the approved one`;
    return undefined;
  }

  /**
   * Makes `contract` — the current version of an MCP tool in the contract catalog — the approved definition of
   * its server's tool. A server quarantined because that tool changed is released when the new version pins
   * exactly the definition the server presented; the server's other pins are checked again before it serves.
   * Contracts of servers not on the allow-list are ignored (their calls are refused).
   */
  approve(contract: ToolContract): void {
    if (contract.transport.kind !== "mcp" || contract.transport.definition_hash === undefined) return;
    const { server, tool, definition_hash: pin } = contract.transport;
    const config = this.#options.servers[server];
    if (!config) return;
    let link = this.#links.get(server);
    if (!link) {
      link = new ServerLink(server, config, new Map());
      this.#links.set(server, link);
    }
    if (link.pins.get(tool) === pin) return;
    link.pins.set(tool, pin);
    this.#log.info({ server, tool, contract: `${contract.name}@${contract.version}`, definition_hash: pin }, "MCP tool definition approved");
    if (link.quarantine?.tool === tool && link.quarantine.observed === pin) {
      link.quarantine = undefined;
      this.#log.warn({ server, tool, contract: `${contract.name}@${contract.version}` }, "MCP server released from quarantine by a new contract version");
    }
    // A new pin (or a lifted quarantine) is checked against what the server presents now.
    if (link.client) void this.#recheck(link).catch((error: unknown) => this.#log.warn({ err: error, server }, "re-check failed"));
  }

  /** The quarantine of `server`, if it is quarantined. */
  quarantineOf(server: string): Quarantine | undefined {
    return this.#links.get(server)?.quarantine;
  }

  /** Calls the tool once. Throws only when `ctx.signal` aborts (the executor has already timed the call out). */
  async call(contract: ToolContract, args: Record<string, JsonValue>, ctx: ToolContext): Promise<ToolAnswer> {
    const refused = this.refusal(contract);
    if (refused !== undefined || contract.transport.kind !== "mcp") {
      return { outcome: { ok: false, code: "TOOL_DISABLED", message: `${contract.name} is not available` }, evidence: { reason: refused } };
    }
    const link = this.#links.get(contract.transport.server)!;
    const sideEffect = writes(contract);
    let client: Client;
    try {
      client = await this.#connect(link);
    } catch (error) {
      return {
        outcome: { ok: false, code: "UPSTREAM_UNAVAILABLE", message: `${contract.name} could not be reached`, retryable: true },
        evidence: { transport: "mcp", server: link.name, error: error instanceof Error ? error.message.slice(0, 512) : "unknown" },
      };
    }
    // Checked again after connecting: the connection's own listing may just have quarantined the server.
    if (link.quarantine) return { outcome: { ok: false, code: "TOOL_DISABLED", message: `${contract.name} is not available` } };
    let result: Awaited<ReturnType<Client["callTool"]>>;
    try {
      result = await client.callTool(
        {
          name: contract.transport.tool,
          arguments: args,
          _meta: { "io.toolgate/idempotency-key": ctx.idempotencyKey, "io.toolgate/call-id": ctx.callId },
        },
        undefined,
        { signal: ctx.signal, timeout: contract.timeout_ms + 1_000 },
      );
    } catch (error) {
      if (ctx.signal.aborted) throw error;
      const evidence = { transport: "mcp", server: link.name, error: error instanceof Error ? error.message.slice(0, 512) : "unknown" };
      const lost = error instanceof McpError && (error.code === Number(ErrorCode.ConnectionClosed) || error.code === Number(ErrorCode.RequestTimeout));
      if (!(error instanceof McpError) || lost) {
        // The request was sent: a write may have happened on the server.
        return sideEffect
          ? { outcome: { ok: false, code: "OUTCOME_UNKNOWN", message: `the connection to ${contract.name} was lost during the call` }, evidence }
          : { outcome: { ok: false, code: "UPSTREAM_UNAVAILABLE", message: `${contract.name} could not be reached`, retryable: true }, evidence };
      }
      return { outcome: { ok: false, code: "EXECUTION_ERROR", message: `${contract.name} refused the call` }, evidence: { ...evidence, code: error.code } };
    }
    const meta = result._meta as Record<string, unknown> | undefined;
    const requestId = requestIdOf(meta?.["io.toolgate/request-id"]) ?? requestIdOf(meta?.request_id);
    const downstream = { transport: "mcp" as const, ...(requestId ? { request_id: requestId } : {}), raw_output_hash: canonicalHash(result) };
    return { ...this.#interpret(contract, link.name, result), downstream };
  }

  /** The tool's answer as an outcome: its structured content, or its content blocks; an error result is evidence. */
  #interpret(contract: ToolContract, server: string, result: Awaited<ReturnType<Client["callTool"]>>): ToolAnswer {
    const link = { name: server };
    const content = Array.isArray(result.content) ? (result.content as Record<string, unknown>[]) : [];
    if (result.isError === true) {
      // Tool errors are the server's own text: operators see it, the model only the fact.
      return {
        outcome: { ok: false, code: "EXECUTION_ERROR", message: `${contract.name} reported an error` },
        evidence: { transport: "mcp", server: link.name, content: content.slice(0, 8) },
      };
    }
    if (result.structuredContent !== undefined && result.structuredContent !== null)
      return { outcome: { ok: true, data: result.structuredContent as JsonValue } };
    return {
      outcome: {
        ok: true,
        data: {
          content: content.map((c) => {
            const block: Record<string, JsonValue> = { type: typeof c.type === "string" ? c.type : "unknown" };
            if (typeof c.text === "string") block.text = c.text;
            if (typeof c.mimeType === "string") block.mimeType = c.mimeType;
            return block;
          }),
        },
      },
    };
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#timer);
    await Promise.all([...this.#links.values()].map((link) => (link.client ? link.client.close().catch(() => undefined) : Promise.resolve())));
  }

  async #connect(link: ServerLink): Promise<Client> {
    if (link.client) return link.client;
    if (link.connecting) return link.connecting;
    if (Date.now() < link.nextAttemptAt) throw new Error(`MCP server ${link.name} is down; next attempt in ${link.nextAttemptAt - Date.now()} ms`);
    link.connecting = (async () => {
      const client = new Client(
        { name: "toolgate-executor", version: "1.0.0" },
        {
          capabilities: {},
          listChanged: {
            tools: {
              autoRefresh: false,
              debounceMs: 100,
              onChanged: () => void this.#recheck(link).catch((error: unknown) => this.#log.warn({ err: error, server: link.name }, "re-check failed")),
            },
          },
        },
      );
      const transport = this.#transportFor(link);
      try {
        await withTimeout(client.connect(transport), CONNECT_TIMEOUT_MS, `connecting to MCP server ${link.name}`);
        this.#verify(link, await this.#listTools(client));
      } catch (error) {
        await client.close().catch(() => undefined);
        link.failures += 1;
        link.nextAttemptAt = Date.now() + Math.min(RECONNECT_MAX_MS, RECONNECT_MIN_MS * 2 ** (link.failures - 1));
        this.#log.warn({ err: error, server: link.name, failures: link.failures }, "MCP server unreachable");
        throw error;
      }
      client.onclose = () => {
        if (link.client === client) link.client = undefined;
        if (!this.#closed) this.#log.warn({ server: link.name }, "MCP connection closed");
      };
      link.failures = 0;
      link.client = client;
      this.#log.info({ server: link.name, pinned: [...link.pins.keys()], quarantined: Boolean(link.quarantine) }, "MCP server connected");
      return client;
    })().finally(() => {
      link.connecting = undefined;
    });
    return link.connecting;
  }

  #transportFor(link: ServerLink): Transport {
    const config = link.config;
    if (config.transport === "stdio") {
      const transport = new StdioClientTransport({
        command: config.command,
        args: config.args,
        env: { ...getDefaultEnvironment(), ...config.env },
        ...(config.cwd ? { cwd: config.cwd } : {}),
        stderr: "pipe",
        maxBufferSize: STDIO_MAX_BUFFER_BYTES,
      });
      transport.stderr?.on("data", (chunk: Buffer) =>
        this.#log.debug({ server: link.name, stderr: chunk.toString("utf8").slice(0, 1_024) }, "MCP server stderr"),
      );
      return transport;
    }
    return new StreamableHTTPClientTransport(new URL(config.url), { requestInit: { headers: config.headers } });
  }

  async #listTools(client: Client): Promise<Tool[]> {
    const tools: Tool[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 100; page++) {
      const listed = await client.listTools(cursor === undefined ? {} : { cursor });
      tools.push(...listed.tools);
      cursor = listed.nextCursor;
      if (cursor === undefined) break;
    }
    return tools;
  }

  async #recheckAll(): Promise<void> {
    for (const link of this.#links.values()) {
      if (!link.client || link.quarantine) continue;
      await this.#recheck(link).catch((error: unknown) => this.#log.warn({ err: error, server: link.name }, "re-check failed"));
    }
  }

  async #recheck(link: ServerLink): Promise<void> {
    const client = link.client;
    if (!client || link.quarantine) return;
    this.#verify(link, await this.#listTools(client));
  }

  /** Compares the server's definitions with the pins; the first mismatch quarantines the server until a new contract version approves what it presents. */
  #verify(link: ServerLink, tools: readonly Tool[]): void {
    if (link.quarantine) return;
    const byName = new Map(tools.map((t) => [t.name, t]));
    for (const [tool, expected] of link.pins) {
      const definition = byName.get(tool);
      let observed = "missing";
      if (definition) {
        try {
          observed = mcpDefinitionHash(definition);
        } catch {
          observed = "unhashable";
        }
      }
      if (observed === expected) continue;
      link.quarantine = { tool, expected, observed, at: new Date() };
      this.#log.error(
        { server: link.name, tool, expected, observed },
        "MCP tool definition differs from the approved one: server quarantined until a contract approves the new definition",
      );
      this.#options.onQuarantine?.(link.name, link.quarantine);
      return;
    }
  }
}

async function withTimeout<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      work,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
