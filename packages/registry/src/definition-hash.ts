import { canonicalHash } from "@toolgate/contracts";
import type { ToolContract } from "./contract.js";
import { contractHash } from "./contract.js";

/** The parts of an MCP tool definition a pin covers: everything that changes what the tool means or accepts. */
export interface McpToolDefinition {
  name: string;
  title?: string | undefined;
  description?: string | undefined;
  inputSchema: unknown;
  outputSchema?: unknown;
  annotations?: unknown;
}

/**
 * Hash of an MCP server's definition of one tool (RFC 8785 canonical JSON of name, title, description, input
 * and output schemas and annotations): what a contract's `transport.definition_hash` pins, computed exactly as
 * the executor computes it from `tools/list`. Fields the server adds elsewhere (`_meta`, icons) do not change it.
 */
export function mcpDefinitionHash(tool: McpToolDefinition): string {
  const pinned: Record<string, unknown> = { name: tool.name, inputSchema: tool.inputSchema };
  if (tool.title !== undefined) pinned.title = tool.title;
  if (tool.description !== undefined) pinned.description = tool.description;
  if (tool.outputSchema !== undefined) pinned.outputSchema = tool.outputSchema;
  if (tool.annotations !== undefined) pinned.annotations = tool.annotations;
  return canonicalHash(pinned);
}

/**
 * The hash a quarantine approval names: the server's definition hash for an MCP tool that pins one (what the
 * server presents, whatever contract version carries it), otherwise the contract's own content hash.
 */
export function definitionHashOf(contract: ToolContract): string {
  return contract.transport.kind === "mcp" && contract.transport.definition_hash !== undefined ? contract.transport.definition_hash : contractHash(contract);
}
