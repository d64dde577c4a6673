import { canonicalHash } from "@toolgate/contracts";

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
 * and output schemas and annotations): what a contract's `transport.definition_hash` pins. Any change to those
 * fields changes it; fields the server adds elsewhere (`_meta`, icons) do not.
 */
export function mcpDefinitionHash(tool: McpToolDefinition): string {
  const pinned: Record<string, unknown> = { name: tool.name, inputSchema: tool.inputSchema };
  if (tool.title !== undefined) pinned.title = tool.title;
  if (tool.description !== undefined) pinned.description = tool.description;
  if (tool.outputSchema !== undefined) pinned.outputSchema = tool.outputSchema;
  if (tool.annotations !== undefined) pinned.annotations = tool.annotations;
  return canonicalHash(pinned);
}
