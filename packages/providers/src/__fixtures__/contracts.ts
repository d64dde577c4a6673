// Golden inputs shared by every provider's fixtures: two contracts (a strict-compatible read tool from seed 000
// and a write tool with an optional property and a URL format) and three terminal results.
import type { ToolContractInput } from "@toolgate/registry";
import type { CallResult } from "../types.js";

export const searchSources: ToolContractInput = {
  name: "search_sources",
  version: "1.0.0",
  description:
    "Searches the research document collection by keywords and returns up to `limit` candidate sources. Use it to discover documents; do not use it when you already have a URL.",
  owner: "research-platform",
  input_schema: {
    type: "object",
    properties: {
      query: { type: "string", minLength: 3, maxLength: 256, description: "Keywords." },
      source_type: { type: "string", enum: ["official", "any"] },
      limit: { type: "integer", minimum: 1, maximum: 10 },
    },
    required: ["query", "source_type", "limit"],
    additionalProperties: false,
  },
  output_schema: {
    type: "object",
    properties: { items: { type: "array", maxItems: 10, items: { type: "object" } } },
    required: ["items"],
    additionalProperties: false,
  },
  side_effect: "read",
  risk: "low",
  timeout_ms: 2000,
  idempotency: { kind: "natural" },
  untrusted_output: true,
};

export const saveNote: ToolContractInput = {
  name: "save_note",
  version: "1.0.0",
  description: "Saves one note about a source to the current task. Use it after reading the source; do not use it for notes without a source.",
  owner: "research-platform",
  input_schema: {
    type: "object",
    properties: {
      text: { type: "string", minLength: 1, maxLength: 2000 },
      source_url: { type: "string", format: "uri", maxLength: 2048 },
      tags: { type: "array", maxItems: 5, items: { type: "string", pattern: "^[a-z]{1,16}$" } },
    },
    required: ["text", "source_url"],
    additionalProperties: false,
  },
  output_schema: { type: "object", properties: { note_id: { type: "string" } }, required: ["note_id"], additionalProperties: false },
  side_effect: "write",
  risk: "medium",
  approval: "when_tainted",
  timeout_ms: 3000,
  idempotency: { kind: "keyed" },
};

export const contracts: ToolContractInput[] = [searchSources, saveNote];

/** The seed's calls: the C04 search, `limit: 50`, and an unknown `force: true`. */
export const C04_ARGUMENTS = { query: "OpenAI Agents SDK state management", source_type: "official", limit: 3 };
export const LIMIT_50_ARGUMENTS = { ...C04_ARGUMENTS, limit: 50 };
export const FORCE_ARGUMENTS = { ...C04_ARGUMENTS, force: true };

/** Results keyed by the provider's call ids `a`, `b`, `c` (each provider fixture maps its ids onto them). */
export function results(ids: readonly [string, string, string]): CallResult[] {
  return [
    {
      id: ids[1],
      result: {
        ok: false,
        error: { code: "INVALID_ARGUMENTS", message: "arguments do not match the search_sources schema: /limit must be <= 10", details: { violations: [{ pointer: "/limit", message: "must be <= 10", keyword: "maximum" }] } },
        retryable: false,
        call_id: "call_01KB0000000000000000000002",
      },
    },
    {
      id: ids[0],
      result: {
        ok: true,
        data: { items: [{ title: "Sessions", url: "https://example.test/openai-agents/session", source_type: "official", snippet: "Sessions provide a persistent memory layer" }] },
        retryable: false,
        call_id: "call_01KB0000000000000000000001",
      },
    },
    {
      id: ids[2],
      result: {
        ok: false,
        error: { code: "INVALID_ARGUMENTS", message: "arguments do not match the search_sources schema: /force is not an allowed property", details: { violations: [{ pointer: "/force", message: "is not an allowed property", keyword: "additionalProperties" }] } },
        retryable: false,
        call_id: "call_01KB0000000000000000000003",
      },
    },
  ];
}
