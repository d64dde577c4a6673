import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { getDefaultEnvironment, StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import { mcpDefinitionHash, type ToolContractInput } from "@toolgate/registry";

/** How to start an MCP server process that speaks MCP on its stdin and stdout. */
export interface StdioServer {
  /** The server's name in contracts (`transport.server`): lower case, digits, `_` and `-`. */
  name: string;
  command: string;
  args?: readonly string[];
  env?: Readonly<Record<string, string>>;
  cwd?: string;
}

/** One tool as the server presented it, its definition hash and the draft contract made of it. */
export interface DiscoveredTool {
  definition: Tool;
  /** What the executor computes from `tools/list` and a contract pins: see `mcpDefinitionHash`. */
  definition_hash: string;
  draft: ToolContractInput;
}

/** The server could not be started, did not answer or answered with something other than a tool list. Retryable. */
export class DiscoveryError extends Error {
  readonly code = "DISCOVERY_FAILED";
  readonly retryable = true;
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "DiscoveryError";
  }
}

export interface DiscoveryOptions {
  /** Gives up on a server that takes longer than this to start and list its tools. Default 15 s. */
  timeoutMs?: number;
}

const STDIO_MAX_BUFFER_BYTES = 8 * 1024 * 1024;
const MAX_PAGES = 100;

/**
 * Starts the server process, lists its tools (every page) and stops it. Each tool becomes a draft contract pinned
 * to its definition hash. Drafts are untrusted: admit them with `admitDefinitions`, which lints them for poisoning
 * and quarantines what it flags. Throws {@link DiscoveryError}.
 */
export async function discoverStdioTools(server: StdioServer, options: DiscoveryOptions = {}): Promise<DiscoveredTool[]> {
  const client = new Client({ name: "toolgate-discovery", version: "1.0.0" }, { capabilities: {} });
  const transport = new StdioClientTransport({
    command: server.command,
    args: [...(server.args ?? [])],
    env: { ...getDefaultEnvironment(), ...server.env },
    ...(server.cwd !== undefined ? { cwd: server.cwd } : {}),
    stderr: "ignore",
    maxBufferSize: STDIO_MAX_BUFFER_BYTES,
  });
  const timeoutMs = options.timeoutMs ?? 15_000;
  let timer: NodeJS.Timeout | undefined;
  try {
    const tools = await Promise.race([
      (async () => {
        await client.connect(transport);
        const listed: Tool[] = [];
        let cursor: string | undefined;
        for (let page = 0; page < MAX_PAGES; page++) {
          const reply = await client.listTools(cursor === undefined ? {} : { cursor }, { timeout: timeoutMs });
          listed.push(...reply.tools);
          cursor = reply.nextCursor;
          if (cursor === undefined) break;
        }
        return listed;
      })(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no tool list within ${timeoutMs} ms`)), timeoutMs);
      }),
    ]);
    return tools.map((definition) => {
      const definition_hash = mcpDefinitionHash(definition);
      return { definition, definition_hash, draft: draftContract(server.name, definition, definition_hash) };
    });
  } catch (error) {
    throw new DiscoveryError(`could not list the tools of MCP server ${server.name}: ${(error as Error).message}`, { cause: error });
  } finally {
    clearTimeout(timer);
    await client.close().catch(() => undefined);
  }
}

/** Unstructured MCP results become `{ content: [...] }`, as the executor's MCP transport returns them. */
const CONTENT_OUTPUT = {
  type: "object",
  properties: {
    content: {
      type: "array",
      maxItems: 64,
      items: {
        type: "object",
        properties: { type: { type: "string" }, text: { type: "string" }, mimeType: { type: "string" } },
        required: ["type"],
        additionalProperties: false,
      },
    },
  },
  required: ["content"],
  additionalProperties: false,
} as const;

/**
 * The draft contract of one MCP tool, with explicit, cautious defaults: unless the server says the tool is
 * read-only it is treated as a write that needs approval (high risk when it says destructive), its output is
 * untrusted content, and the contract pins exactly the definition seen. The server's text is kept verbatim:
 * the linter must see what a model would.
 */
export function draftContract(server: string, tool: Tool, definitionHash: string): ToolContractInput {
  const annotations = tool.annotations ?? {};
  const readOnly = annotations.readOnlyHint === true;
  const description = tool.description ?? tool.title ?? "";
  return {
    name: contractName(server, tool.name),
    version: "1.0.0",
    description: description.length >= 20 ? description : `${description} (MCP tool ${tool.name} of server ${server})`.trim(),
    owner: `mcp:${server}`,
    input_schema: withoutForeignDialect(tool.inputSchema),
    output_schema: tool.outputSchema ? withoutForeignDialect(tool.outputSchema) : CONTENT_OUTPUT,
    side_effect: readOnly ? "read" : "write",
    risk: readOnly ? "low" : annotations.destructiveHint === true ? "high" : "medium",
    approval: readOnly ? "never" : "always",
    timeout_ms: 30_000,
    idempotency: readOnly || annotations.idempotentHint === true ? { kind: "natural" } : { kind: "keyed" },
    untrusted_output: true,
    transport: { kind: "mcp", server, tool: tool.name, definition_hash: definitionHash },
  };
}

/** `<server>_<tool>` in lower snake case, at most 64 characters: a name every provider and subject accepts. */
export function contractName(server: string, tool: string): string {
  const snake = `${server}_${tool}`
    .replace(/([a-z0-9])([A-Z])/g, "$1_$2")
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "_")
    .replace(/^_+|_+$/g, "");
  const name = /^[a-z]/.test(snake) ? snake : `t_${snake}`;
  return name.slice(0, 64).replace(/_+$/, "");
}

/** A root `$schema` of another dialect (servers built with zod emit draft-07) would stop the 2020-12 compiler. */
function withoutForeignDialect(schema: Record<string, unknown>): Record<string, unknown> {
  if (schema.$schema === undefined || schema.$schema === "https://json-schema.org/draft/2020-12/schema") return schema;
  const { $schema: _dialect, ...rest } = schema;
  return rest;
}
