// Gemini: a response whose first candidate has three functionCall parts (typed by the SDK); the last has no id.
import type { FunctionDeclaration, GeminiResponse, Part } from "../sdk-types.js";
import type { Type } from "@google/genai";
import type { ExportNote, ParsedToolCall } from "../types.js";
import { C04_ARGUMENTS, FORCE_ARGUMENTS, LIMIT_50_ARGUMENTS } from "./contracts.js";

export const ids = ["fc-1", "fc-2", "gemini_call_3"] as const;

export const response = {
  responseId: "r-1",
  modelVersion: "gemini-2.5-pro",
  candidates: [
    {
      index: 0,
      content: {
        role: "model",
        parts: [
          { text: "Searching.", thoughtSignature: "c2ln" },
          { functionCall: { id: ids[0], name: "search_sources", args: C04_ARGUMENTS } },
          { functionCall: { id: ids[1], name: "search_sources", args: LIMIT_50_ARGUMENTS } },
          { functionCall: { name: "search_sources", args: FORCE_ARGUMENTS } },
        ],
      },
    },
  ],
} satisfies GeminiResponse;

// ---- golden outputs: what Toolgate must produce for the inputs above. Change them only on purpose.

export const calls: ParsedToolCall[] = [
  {
    "id": "fc-1",
    "name": "search_sources",
    "argumentsJson": "{\"query\":\"OpenAI Agents SDK state management\",\"source_type\":\"official\",\"limit\":3}"
  },
  {
    "id": "fc-2",
    "name": "search_sources",
    "argumentsJson": "{\"query\":\"OpenAI Agents SDK state management\",\"source_type\":\"official\",\"limit\":50}"
  },
  {
    "id": "gemini_call_3",
    "name": "search_sources",
    "argumentsJson": "{\"query\":\"OpenAI Agents SDK state management\",\"source_type\":\"official\",\"limit\":3,\"force\":true}",
    "origin": {
      "generatedId": true
    }
  }
];

export const formatted = [
  {
    "functionResponse": {
      "id": "fc-1",
      "name": "search_sources",
      "response": {
        "output": {
          "items": [
            {
              "title": "Sessions",
              "url": "https://example.test/openai-agents/session",
              "source_type": "official",
              "snippet": "Sessions provide a persistent memory layer"
            }
          ]
        }
      }
    }
  },
  {
    "functionResponse": {
      "id": "fc-2",
      "name": "search_sources",
      "response": {
        "error": {
          "code": "INVALID_ARGUMENTS",
          "message": "arguments do not match the search_sources schema: /limit must be <= 10",
          "details": {
            "violations": [
              {
                "pointer": "/limit",
                "message": "must be <= 10",
                "keyword": "maximum"
              }
            ]
          },
          "retryable": false
        }
      }
    }
  },
  {
    "functionResponse": {
      "name": "search_sources",
      "response": {
        "error": {
          "code": "INVALID_ARGUMENTS",
          "message": "arguments do not match the search_sources schema: /force is not an allowed property",
          "details": {
            "violations": [
              {
                "pointer": "/force",
                "message": "is not an allowed property",
                "keyword": "additionalProperties"
              }
            ]
          },
          "retryable": false
        }
      }
    }
  }
] satisfies Part[];

export const tools = [
  {
    "name": "search_sources",
    "description": "Searches the research document collection by keywords and returns up to `limit` candidate sources. Use it to discover documents; do not use it when you already have a URL.",
    "parameters": {
      "type": "OBJECT" as Type,
      "properties": {
        "query": {
          "type": "STRING" as Type,
          "minLength": "3",
          "maxLength": "256",
          "description": "Keywords."
        },
        "source_type": {
          "type": "STRING" as Type,
          "enum": [
            "official",
            "any"
          ]
        },
        "limit": {
          "type": "INTEGER" as Type,
          "minimum": 1,
          "maximum": 10
        }
      },
      "propertyOrdering": [
        "query",
        "source_type",
        "limit"
      ],
      "required": [
        "query",
        "source_type",
        "limit"
      ]
    }
  },
  {
    "name": "save_note",
    "description": "Saves one note about a source to the current task. Use it after reading the source; do not use it for notes without a source.",
    "parameters": {
      "type": "OBJECT" as Type,
      "properties": {
        "text": {
          "type": "STRING" as Type,
          "minLength": "1",
          "maxLength": "2000"
        },
        "source_url": {
          "type": "STRING" as Type,
          "maxLength": "2048"
        },
        "tags": {
          "type": "ARRAY" as Type,
          "maxItems": "5",
          "items": {
            "type": "STRING" as Type,
            "pattern": "^[a-z]{1,16}$"
          }
        }
      },
      "propertyOrdering": [
        "text",
        "source_url",
        "tags"
      ],
      "required": [
        "text",
        "source_url"
      ]
    }
  }
] satisfies FunctionDeclaration[];

export const notes: ExportNote[] = [
  {
    "tool": "save_note",
    "pointer": "/properties/source_url/format",
    "message": "format \"uri\" is not one Gemini knows; the runtime still checks it"
  }
];
