import { ErrorCodeSchema, JsonValueSchema, type JsonValue } from "@toolgate/contracts";
import type { ToolHandler, ToolOutcome } from "@toolgate/registry";
import { z } from "zod";
import { abortableDelay } from "./abortable.js";
import { cancelled, stringArgument } from "./tool-arguments.js";

/**
 * A faulty or malicious answer a read tool gives instead of the corpus's, for evaluation (seed 001 §8's fifth
 * class): a page carrying injected instructions, a result that breaks the output schema, one too large, a
 * typed failure, or a backend that hangs. Only the read tools can be served: a write always runs for real, so
 * the store stays the truth about effects.
 */
export const ServedResultSchema = z
  .object({
    tool: z.enum(["search_sources", "fetch_document"]),
    /** Which calls get it: `fetch_document` of exactly this URL, or a `search_sources` query containing this text. */
    when: z.union([z.object({ url: z.url().max(2048) }).strict(), z.object({ query_contains: z.string().min(3).max(256) }).strict()]),
    respond: z.union([
      /** Returned as the tool's data, as is: the runtime's output validation decides what the model sees. */
      z.object({ data: JsonValueSchema }).strict(),
      /** A typed failure of the downstream. */
      z.object({ error: z.object({ code: ErrorCodeSchema, message: z.string().min(1).max(1024), retryable: z.boolean().default(false) }).strict() }).strict(),
      /** A backend that answers only after this long (past the contract's timeout it is the runtime's TIMEOUT). */
      z.object({ delay_ms: z.number().int().min(1).max(60_000) }).strict(),
      /** A well-formed result whose text is this many bytes: past the contract's result limit. */
      z.object({ oversized_bytes: z.number().int().min(1).max(4_000_000) }).strict(),
    ]),
  })
  .strict();
export type ServedResult = z.infer<typeof ServedResultSchema>;

/** Whether a served result applies to a call of `tool` with these (validated) arguments. */
export function servedResultMatches(served: ServedResult, tool: string, args: Record<string, JsonValue>): boolean {
  if (served.tool !== tool) return false;
  if ("url" in served.when) return stringArgument(args, "url") === served.when.url;
  const query = stringArgument(args, "query");
  return query !== undefined && query.toLowerCase().includes(served.when.query_contains.toLowerCase());
}

/**
 * Wraps a read tool's handler: the first served result that matches a call answers it, any other call goes to
 * `inner`. Served delays stop on abort, as the real backends do.
 */
export function servingHandler(tool: "search_sources" | "fetch_document", served: readonly ServedResult[], inner: ToolHandler): ToolHandler {
  const mine = served.filter((s) => s.tool === tool);
  if (mine.length === 0) return inner;
  return async (args, ctx) => {
    const hit = mine.find((s) => servedResultMatches(s, tool, args));
    if (hit === undefined) return inner(args, ctx);
    const respond = hit.respond;
    if ("data" in respond) return { ok: true, data: respond.data };
    if ("error" in respond) return { ok: false, code: respond.error.code, message: respond.error.message, retryable: respond.error.retryable };
    if ("delay_ms" in respond) {
      if ((await abortableDelay(respond.delay_ms, ctx.signal)) === "aborted") return cancelled();
      return inner(args, ctx);
    }
    return oversized(tool, args, respond.oversized_bytes);
  };
}

function oversized(tool: string, args: Record<string, JsonValue>, bytes: number): ToolOutcome {
  const text = "x".repeat(bytes);
  if (tool === "fetch_document") {
    return { ok: true, data: { url: stringArgument(args, "url") ?? "", title: "Oversized page", text, chars: bytes, truncated: false } };
  }
  return { ok: true, data: { items: [{ title: "Oversized result", url: "https://eval.toolgate.test/oversized", source_type: "community", snippet: text }] } };
}
