// Anthropic Messages: a response with text and three tool_use blocks (typed by the SDK).
import type { AnthropicMessage, AnthropicTool, ToolResultBlockParam } from "../sdk-types.js";
import type { ExportNote, ParsedToolCall } from "../types.js";
import { C04_ARGUMENTS, FORCE_ARGUMENTS, LIMIT_50_ARGUMENTS } from "./contracts.js";

export const ids = ["toolu_01A", "toolu_01B", "toolu_01C"] as const;

export const response = {
  id: "msg_01",
  type: "message",
  role: "assistant",
  model: "claude-sonnet-4-5",
  container: null,
  diagnostics: null,
  stop_details: null,
  stop_reason: "tool_use",
  stop_sequence: null,
  usage: {
    input_tokens: 500,
    output_tokens: 120,
    cache_creation_input_tokens: null,
    cache_read_input_tokens: null,
    cache_creation: null,
    server_tool_use: null,
    service_tier: null,
    inference_geo: null,
    output_tokens_details: null,
    speed: null,
  },
  content: [
    { type: "text", text: "I will search for sources.", citations: null },
    { type: "tool_use", id: ids[0], name: "search_sources", input: C04_ARGUMENTS, caller: { type: "direct" } },
    { type: "tool_use", id: ids[1], name: "search_sources", input: LIMIT_50_ARGUMENTS, caller: { type: "direct" } },
    { type: "tool_use", id: ids[2], name: "search_sources", input: FORCE_ARGUMENTS, caller: { type: "direct" } },
  ],
} satisfies AnthropicMessage;

// ---- golden outputs: what Toolgate must produce for the inputs above. Change them only on purpose.

export const calls: ParsedToolCall[] = [
  {
    "id": "toolu_01A",
    "name": "search_sources",
    "argumentsJson": "{\"query\":\"OpenAI Agents SDK state management\",\"source_type\":\"official\",\"limit\":3}"
  },
  {
    "id": "toolu_01B",
    "name": "search_sources",
    "argumentsJson": "{\"query\":\"OpenAI Agents SDK state management\",\"source_type\":\"official\",\"limit\":50}"
  },
  {
    "id": "toolu_01C",
    "name": "search_sources",
    "argumentsJson": "{\"query\":\"OpenAI Agents SDK state management\",\"source_type\":\"official\",\"limit\":3,\"force\":true}"
  }
];

export const formatted = [
  {
    "type": "tool_result",
    "tool_use_id": "toolu_01A",
    "content": "{\"ok\":true,\"data\":{\"items\":[{\"title\":\"Sessions\",\"url\":\"https://example.test/openai-agents/session\",\"source_type\":\"official\",\"snippet\":\"Sessions provide a persistent memory layer\"}]}}",
    "is_error": false
  },
  {
    "type": "tool_result",
    "tool_use_id": "toolu_01B",
    "content": "{\"ok\":false,\"error\":{\"code\":\"INVALID_ARGUMENTS\",\"message\":\"arguments do not match the search_sources schema: /limit must be <= 10\",\"details\":{\"violations\":[{\"pointer\":\"/limit\",\"message\":\"must be <= 10\",\"keyword\":\"maximum\"}]}},\"retryable\":false}",
    "is_error": true
  },
  {
    "type": "tool_result",
    "tool_use_id": "toolu_01C",
    "content": "{\"ok\":false,\"error\":{\"code\":\"INVALID_ARGUMENTS\",\"message\":\"arguments do not match the search_sources schema: /force is not an allowed property\",\"details\":{\"violations\":[{\"pointer\":\"/force\",\"message\":\"is not an allowed property\",\"keyword\":\"additionalProperties\"}]}},\"retryable\":false}",
    "is_error": true
  }
] satisfies ToolResultBlockParam[];

export const tools = [
  {
    "name": "search_sources",
    "description": "Searches the research document collection by keywords and returns up to `limit` candidate sources. Use it to discover documents; do not use it when you already have a URL.",
    "input_schema": {
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
    }
  },
  {
    "name": "save_note",
    "description": "Saves one note about a source to the current task. Use it after reading the source; do not use it for notes without a source.",
    "input_schema": {
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
    }
  }
] satisfies AnthropicTool[];

export const notes: ExportNote[] = [];
