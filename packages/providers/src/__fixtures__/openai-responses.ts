// OpenAI Responses API: a response with three function calls (typed by the SDK) and what Toolgate makes of it.
import type { FunctionTool, OpenAIFunctionCallOutput, Response } from "../sdk-types.js";
import type { ExportNote, ParsedToolCall } from "../types.js";
import { C04_ARGUMENTS, FORCE_ARGUMENTS, LIMIT_50_ARGUMENTS } from "./contracts.js";

export const ids = ["call_Hx1", "call_Hx2", "call_Hx3"] as const;

export const response = {
  id: "resp_68a0",
  object: "response",
  created_at: 1_764_000_000,
  model: "gpt-5.1",
  status: "completed",
  error: null,
  incomplete_details: null,
  instructions: null,
  metadata: {},
  parallel_tool_calls: true,
  temperature: 1,
  top_p: 1,
  tool_choice: "auto",
  tools: [],
  output: [
    { type: "reasoning", id: "rs_1", summary: [] },
    { type: "function_call", id: "fc_1", call_id: ids[0], name: "search_sources", arguments: JSON.stringify(C04_ARGUMENTS), status: "completed" },
    { type: "function_call", id: "fc_2", call_id: ids[1], name: "search_sources", arguments: JSON.stringify(LIMIT_50_ARGUMENTS), status: "completed" },
    { type: "function_call", id: "fc_3", call_id: ids[2], name: "search_sources", arguments: JSON.stringify(FORCE_ARGUMENTS), status: "completed" },
  ],
  output_text: "",
} satisfies Response;

// ---- golden outputs: what Toolgate must produce for the inputs above. Change them only on purpose.

export const calls: ParsedToolCall[] = [
  {
    "id": "call_Hx1",
    "name": "search_sources",
    "argumentsJson": "{\"query\":\"OpenAI Agents SDK state management\",\"source_type\":\"official\",\"limit\":3}"
  },
  {
    "id": "call_Hx2",
    "name": "search_sources",
    "argumentsJson": "{\"query\":\"OpenAI Agents SDK state management\",\"source_type\":\"official\",\"limit\":50}"
  },
  {
    "id": "call_Hx3",
    "name": "search_sources",
    "argumentsJson": "{\"query\":\"OpenAI Agents SDK state management\",\"source_type\":\"official\",\"limit\":3,\"force\":true}"
  }
];

export const formatted = [
  {
    "type": "function_call_output",
    "call_id": "call_Hx1",
    "output": "{\"ok\":true,\"data\":{\"items\":[{\"title\":\"Sessions\",\"url\":\"https://example.test/openai-agents/session\",\"source_type\":\"official\",\"snippet\":\"Sessions provide a persistent memory layer\"}]}}"
  },
  {
    "type": "function_call_output",
    "call_id": "call_Hx2",
    "output": "{\"ok\":false,\"error\":{\"code\":\"INVALID_ARGUMENTS\",\"message\":\"arguments do not match the search_sources schema: /limit must be <= 10\",\"details\":{\"violations\":[{\"pointer\":\"/limit\",\"message\":\"must be <= 10\",\"keyword\":\"maximum\"}]}},\"retryable\":false}"
  },
  {
    "type": "function_call_output",
    "call_id": "call_Hx3",
    "output": "{\"ok\":false,\"error\":{\"code\":\"INVALID_ARGUMENTS\",\"message\":\"arguments do not match the search_sources schema: /force is not an allowed property\",\"details\":{\"violations\":[{\"pointer\":\"/force\",\"message\":\"is not an allowed property\",\"keyword\":\"additionalProperties\"}]}},\"retryable\":false}"
  }
] satisfies OpenAIFunctionCallOutput[];

export const tools = [
  {
    "type": "function",
    "name": "search_sources",
    "description": "Searches the research document collection by keywords and returns up to `limit` candidate sources. Use it to discover documents; do not use it when you already have a URL.",
    "parameters": {
      "type": "object",
      "properties": {
        "query": {
          "type": "string",
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
    "strict": true
  },
  {
    "type": "function",
    "name": "save_note",
    "description": "Saves one note about a source to the current task. Use it after reading the source; do not use it for notes without a source.",
    "parameters": {
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
    "strict": false
  }
] satisfies FunctionTool[];

export const notes: ExportNote[] = [
  {
    "tool": "search_sources",
    "pointer": "/properties/query/minLength",
    "message": "minLength is not supported in strict mode; the runtime still enforces it"
  },
  {
    "tool": "search_sources",
    "pointer": "/properties/query/maxLength",
    "message": "maxLength is not supported in strict mode; the runtime still enforces it"
  },
  {
    "tool": "save_note",
    "pointer": "",
    "message": "sent non-strict: /properties/tags optional (strict mode requires every property)"
  }
];
