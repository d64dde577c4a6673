import type { ToolContractInput } from "@toolgate/registry";

// Tools of two official MCP servers (npm: @modelcontextprotocol/server-everything and server-memory), run by the
// executor through its MCP client. Each contract pins the server's definition of the tool: a server that starts
// presenting another definition is quarantined until a new contract version approves it.

/** Pinned definition hashes, as the executor computes them from the servers' `tools/list` (version 2026.8.31 of both). */
export const MCP_EXAMPLE_PINS = {
  everythingEcho: "sha256:99334395706a84865418ecbf36066cd4129006a52808b0aeb067fc048e5fc5e5",
  memoryCreateEntities: "sha256:94f6c13ba45d51e9b6ca98409320410a3b634dc87fffca433bc13f6290caf1da",
  memoryReadGraph: "sha256:e580e453937d94add3638e826755084aab716667d4dab13069cef8bab3ebc858",
} as const;

const owner = "toolgate-examples";
const shortText = { type: "string", minLength: 1, maxLength: 256 } as const;
const entity = {
  type: "object",
  properties: { name: shortText, entityType: shortText, observations: { type: "array", maxItems: 32, items: { type: "string", maxLength: 1_024 } } },
  required: ["name", "entityType", "observations"],
  additionalProperties: false,
} as const;
const relation = {
  type: "object",
  properties: { from: { type: "string" }, to: { type: "string" }, relationType: { type: "string" } },
  required: ["from", "to", "relationType"],
  additionalProperties: false,
} as const;
/** Unstructured MCP results become `{ content: [...] }`: text blocks keep their text, others only their type. */
const contentOutput = {
  type: "object",
  properties: {
    content: {
      type: "array",
      maxItems: 16,
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

export const mcpExampleContracts: ToolContractInput[] = [
  {
    name: "everything_echo",
    version: "1.0.0",
    description: "Echoes a message back through the reference MCP server ('everything'). Use to check MCP connectivity; do not use it for anything else.",
    owner,
    input_schema: {
      type: "object",
      properties: { message: { type: "string", minLength: 1, maxLength: 1_000 } },
      required: ["message"],
      additionalProperties: false,
    },
    output_schema: contentOutput,
    side_effect: "none",
    risk: "low",
    timeout_ms: 5_000,
    idempotency: { kind: "natural" },
    transport: { kind: "mcp", server: "everything", tool: "echo", definition_hash: MCP_EXAMPLE_PINS.everythingEcho },
  },
  {
    name: "memory_create_entities",
    version: "1.0.0",
    description:
      "Adds entities to the knowledge-graph memory (MCP server 'memory'); entities whose name already exists are left unchanged. Use to remember facts; not to update existing ones.",
    owner,
    input_schema: {
      type: "object",
      properties: { entities: { type: "array", minItems: 1, maxItems: 16, items: entity } },
      required: ["entities"],
      additionalProperties: false,
    },
    output_schema: { type: "object", properties: { entities: { type: "array", items: entity } }, required: ["entities"], additionalProperties: false },
    side_effect: "write",
    risk: "low",
    timeout_ms: 5_000,
    idempotency: { kind: "natural" },
    transport: { kind: "mcp", server: "memory", tool: "create_entities", definition_hash: MCP_EXAMPLE_PINS.memoryCreateEntities },
  },
  {
    name: "memory_read_graph",
    version: "1.0.0",
    description: "Reads the whole knowledge-graph memory (MCP server 'memory'): every entity and relation. Use to recall facts; do not use it to change them.",
    owner,
    input_schema: { type: "object", properties: {}, additionalProperties: false },
    output_schema: {
      type: "object",
      properties: { entities: { type: "array", items: entity }, relations: { type: "array", items: relation } },
      required: ["entities", "relations"],
      additionalProperties: false,
    },
    side_effect: "read",
    risk: "low",
    timeout_ms: 5_000,
    idempotency: { kind: "natural" },
    transport: { kind: "mcp", server: "memory", tool: "read_graph", definition_hash: MCP_EXAMPLE_PINS.memoryReadGraph },
  },
];
