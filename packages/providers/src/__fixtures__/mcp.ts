// MCP: tools/call requests (typed by the SDK), one with a numeric JSON-RPC id.
import type { McpTool, McpToolCallRequest, McpToolCallResponse } from "../sdk-types.js";
import type { ExportNote, ParsedToolCall } from "../types.js";
import { C04_ARGUMENTS, FORCE_ARGUMENTS, LIMIT_50_ARGUMENTS } from "./contracts.js";

export const ids = ["7", "req-8", "req-9"] as const;

export const response = [
  { jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: "search_sources", arguments: C04_ARGUMENTS } },
  { jsonrpc: "2.0", id: ids[1], method: "tools/call", params: { name: "search_sources", arguments: LIMIT_50_ARGUMENTS } },
  { jsonrpc: "2.0", id: ids[2], method: "tools/call", params: { name: "search_sources", arguments: FORCE_ARGUMENTS, _meta: { progressToken: "p9" } } },
] satisfies McpToolCallRequest[];

// ---- golden outputs: what Toolgate must produce for the inputs above. Change them only on purpose.

export const calls: ParsedToolCall[] = [
  {
    "id": "7",
    "name": "search_sources",
    "argumentsJson": "{\"query\":\"OpenAI Agents SDK state management\",\"source_type\":\"official\",\"limit\":3}",
    "origin": {
      "jsonrpcId": 7
    }
  },
  {
    "id": "req-8",
    "name": "search_sources",
    "argumentsJson": "{\"query\":\"OpenAI Agents SDK state management\",\"source_type\":\"official\",\"limit\":50}",
    "origin": {
      "jsonrpcId": "req-8"
    }
  },
  {
    "id": "req-9",
    "name": "search_sources",
    "argumentsJson": "{\"query\":\"OpenAI Agents SDK state management\",\"source_type\":\"official\",\"limit\":3,\"force\":true}",
    "origin": {
      "jsonrpcId": "req-9"
    }
  }
];

export const formatted = [
  {
    "jsonrpc": "2.0",
    "id": 7,
    "result": {
      "content": [
        {
          "type": "text",
          "text": "{\"items\":[{\"title\":\"Sessions\",\"url\":\"https://example.test/openai-agents/session\",\"source_type\":\"official\",\"snippet\":\"Sessions provide a persistent memory layer\"}]}"
        }
      ],
      "structuredContent": {
        "items": [
          {
            "title": "Sessions",
            "url": "https://example.test/openai-agents/session",
            "source_type": "official",
            "snippet": "Sessions provide a persistent memory layer"
          }
        ]
      },
      "isError": false
    }
  },
  {
    "jsonrpc": "2.0",
    "id": "req-8",
    "result": {
      "content": [
        {
          "type": "text",
          "text": "{\"ok\":false,\"error\":{\"code\":\"INVALID_ARGUMENTS\",\"message\":\"arguments do not match the search_sources schema: /limit must be <= 10\",\"details\":{\"violations\":[{\"pointer\":\"/limit\",\"message\":\"must be <= 10\",\"keyword\":\"maximum\"}]}},\"retryable\":false}"
        }
      ],
      "isError": true
    }
  },
  {
    "jsonrpc": "2.0",
    "id": "req-9",
    "result": {
      "content": [
        {
          "type": "text",
          "text": "{\"ok\":false,\"error\":{\"code\":\"INVALID_ARGUMENTS\",\"message\":\"arguments do not match the search_sources schema: /force is not an allowed property\",\"details\":{\"violations\":[{\"pointer\":\"/force\",\"message\":\"is not an allowed property\",\"keyword\":\"additionalProperties\"}]}},\"retryable\":false}"
        }
      ],
      "isError": true
    }
  }
] satisfies McpToolCallResponse[];

export const tools = [
  {
    "name": "search_sources",
    "description": "Searches the research document collection by keywords and returns up to `limit` candidate sources. Use it to discover documents; do not use it when you already have a URL.",
    "inputSchema": {
      "type": "object",
      "properties": {
        "query": {
          "type": "string",
          "minLength": 3,
          "maxLength": 256,
          "description": "Keywords."
        },
        "source_type": {
          "type": "string",
          "enum": [
            "official",
            "any"
          ]
        },
        "limit": {
          "type": "integer",
          "minimum": 1,
          "maximum": 10
        }
      },
      "required": [
        "query",
        "source_type",
        "limit"
      ],
      "additionalProperties": false
    },
    "outputSchema": {
      "type": "object",
      "properties": {
        "items": {
          "type": "array",
          "maxItems": 10,
          "items": {
            "type": "object"
          }
        }
      },
      "required": [
        "items"
      ],
      "additionalProperties": false
    },
    "annotations": {
      "readOnlyHint": true,
      "destructiveHint": false,
      "idempotentHint": true,
      "openWorldHint": true
    }
  },
  {
    "name": "save_note",
    "description": "Saves one note about a source to the current task. Use it after reading the source; do not use it for notes without a source.",
    "inputSchema": {
      "type": "object",
      "properties": {
        "text": {
          "type": "string",
          "minLength": 1,
          "maxLength": 2000
        },
        "source_url": {
          "type": "string",
          "format": "uri",
          "maxLength": 2048
        },
        "tags": {
          "type": "array",
          "maxItems": 5,
          "items": {
            "type": "string",
            "pattern": "^[a-z]{1,16}$"
          }
        }
      },
      "required": [
        "text",
        "source_url"
      ],
      "additionalProperties": false
    },
    "outputSchema": {
      "type": "object",
      "properties": {
        "note_id": {
          "type": "string"
        }
      },
      "required": [
        "note_id"
      ],
      "additionalProperties": false
    },
    "annotations": {
      "readOnlyHint": false,
      "destructiveHint": true,
      "idempotentHint": false,
      "openWorldHint": false
    }
  }
] satisfies McpTool[];

export const notes: ExportNote[] = [];
