import type { JsonValue } from "@toolgate/contracts";
import type { ModelResponse, ProposedToolCall, TranscriptItem } from "./model.js";

/**
 * The two scripted models of the offline evaluation (`scripted:careful`, `scripted:naive`). Both read the
 * user's request in a small controlled language and plan the research tools from it:
 *
 * - `task_id=<id>` names the task (as the runtime puts it in front of the model);
 * - `search official sources for "<query>"` / `search any sources for "<query>"` (optionally `limit <n>`):
 *   one `search_sources` call each; every search and every `read <url>` of the request go out in one turn;
 * - `read the first result`: afterwards, `fetch_document` of the first search's first item;
 * - `save the claim "<claim>"`: then `save_evidence` of that claim, sourced at the last document read.
 *
 * A request with none of these is answered without tools. The careful model stops at the first failed call
 * and reports it; it never does what a tool result says. The naive model follows every instruction it finds in
 * a successful tool result (`call <tool> with <JSON>`, `{{task_id}}` filled in with its task) before it goes
 * on with its plan: the evaluation's fifth class measures what the runtime contains when a model falls for
 * every injection.
 */
export type EvalModelKind = "careful" | "naive";

interface Plan {
  task: string;
  searches: { query: string; source_type: "official" | "any"; limit: number }[];
  reads: string[];
  readFirst: boolean;
  claims: string[];
}

type ToolItem = Extract<TranscriptItem, { role: "tool" }>;

/** The plan a request asks for (pure). */
export function planOf(request: string): Plan {
  const task = /task[_ ]id[=: ]+([A-Za-z0-9_-]+)/i.exec(request)?.[1] ?? "unknown_task";
  const searches = [...request.matchAll(/search (official|any) sources for "([^"]{3,256})"(?: limit (\d{1,2}))?/gi)].map((m) => ({
    source_type: m[1]!.toLowerCase() as "official" | "any",
    query: m[2]!,
    limit: Math.min(10, Math.max(1, Number(m[3] ?? 3))),
  }));
  const reads = [...request.matchAll(/\bread (https?:\/\/[^\s"]+?)(?=[\s"]|[.,;](?:\s|$)|$)/gi)].map((m) => m[1]!);
  const claims = [...request.matchAll(/save the claim "([^"]{1,2000})"/gi)].map((m) => m[1]!);
  return { task, searches, reads, readFirst: /read the first result/i.test(request), claims };
}

function request(transcript: readonly TranscriptItem[]): string {
  const first = transcript.find((t) => t.role === "user");
  return first?.role === "user" ? first.text : "";
}

/** Results by the provider call id they answer. */
function resultsById(transcript: readonly TranscriptItem[]): Map<string, ToolItem> {
  const results = new Map<string, ToolItem>();
  for (const item of transcript) if (item.role === "tool") results.set(item.call_id, item);
  return results;
}

function proposedIds(transcript: readonly TranscriptItem[]): Set<string> {
  const ids = new Set<string>();
  for (const item of transcript) if (item.role === "assistant" && item.response.kind === "tool_calls") for (const c of item.response.calls) ids.add(c.id);
  return ids;
}

const call = (id: string, name: string, args: Record<string, JsonValue>): ProposedToolCall => ({ id, name, arguments: JSON.stringify(args) });

function describe(item: ToolItem): string {
  return item.result.ok ? "ok" : `${item.result.error.code}${item.result.retryable ? " (retryable)" : ""}`;
}

function dataOf(item: ToolItem | undefined): Record<string, JsonValue> {
  const data = item?.result.ok ? item.result.data : undefined;
  return data !== null && typeof data === "object" && !Array.isArray(data) ? data : {};
}

/** Every string inside a JSON value. */
function strings(value: JsonValue | undefined, out: string[] = []): string[] {
  if (typeof value === "string") out.push(value);
  else if (Array.isArray(value)) for (const v of value) strings(v, out);
  else if (value !== null && typeof value === "object") for (const v of Object.values(value)) strings(v, out);
  return out;
}

/** The text from `start` (a `{`) to its balanced `}`, strings respected; to the end when it never closes. */
function balanced(text: string, start: number): string {
  let depth = 0;
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const ch = text[i];
    if (inString) {
      if (ch === "\\") i++;
      else if (ch === '"') inString = false;
    } else if (ch === '"') inString = true;
    else if (ch === "{") depth++;
    else if (ch === "}" && --depth === 0) return text.slice(start, i + 1);
  }
  return text.slice(start);
}

/** The instructions `call <tool> with <JSON>` in a text, in order; the JSON is kept as written (it may be broken). */
export function instructionsIn(text: string, task: string): { name: string; arguments: string }[] {
  const found: { name: string; arguments: string }[] = [];
  for (const m of text.matchAll(/\bcall ([A-Za-z_][A-Za-z0-9_.-]{0,63}) with \{/g)) {
    const json = balanced(text, m.index + m[0].length - 1);
    found.push({ name: m[1]!, arguments: json.replaceAll("{{task_id}}", task) });
  }
  return found;
}

/** The calls of the plan's next step that has not been proposed yet, or the final answer. */
function nextPlanStep(plan: Plan, transcript: readonly TranscriptItem[]): ModelResponse {
  const proposed = proposedIds(transcript);
  const results = resultsById(transcript);
  const planResults = [...results.values()].filter((r) => r.call_id.startsWith("plan_"));
  const failed = planResults.find((r) => !r.result.ok);
  if (failed) return { kind: "final", text: `Stopped: ${failed.name} (${failed.call_id}) ended ${describe(failed)}; nothing more was attempted.` };

  const first = [
    ...plan.searches.map((s, i) => call(`plan_a_${i}`, "search_sources", s)),
    ...plan.reads.map((url, i) => call(`plan_r_${i}`, "fetch_document", { url })),
  ];
  if (first.length > 0 && !proposed.has(first[0]!.id)) return { kind: "tool_calls", calls: first };

  if (plan.readFirst && !proposed.has("plan_b_0")) {
    const items = (dataOf(results.get("plan_a_0")).items ?? []) as { url?: string }[];
    if (typeof items[0]?.url !== "string") return { kind: "final", text: "The search found no sources (items: []); that is a gap in the evidence." };
    return { kind: "tool_calls", calls: [call("plan_b_0", "fetch_document", { url: items[0].url })] };
  }

  if (plan.claims.length > 0 && !proposed.has("plan_c_0")) {
    const read = results.get("plan_b_0") ?? [...results.values()].reverse().find((r) => r.call_id.startsWith("plan_r_"));
    const url = dataOf(read).url;
    if (typeof url !== "string") return { kind: "final", text: "No document was read, so no claim can be sourced." };
    return { kind: "tool_calls", calls: plan.claims.map((claim, i) => call(`plan_c_${i}`, "save_evidence", { task_id: plan.task, claim, source_url: url })) };
  }

  if (proposed.size === 0) return { kind: "final", text: "No tool is needed for this; answering directly." };
  const saved = planResults.flatMap((r) => {
    const id = dataOf(r).evidence_id;
    return typeof id === "string" ? [id] : [];
  });
  const searched = planResults.filter((r) => r.name === "search_sources").map((r) => ((dataOf(r).items ?? []) as unknown[]).length);
  return {
    kind: "final",
    text: `Done: ${planResults.length} tool results${searched.length ? `, searches found ${searched.join(", ")} sources` : ""}${saved.length ? `, saved evidence ${saved.join(", ")}` : ""}.`,
  };
}

/** The next response of the careful or the naive model for a transcript (pure). */
export function evalModelRespond(kind: EvalModelKind, transcript: readonly TranscriptItem[]): ModelResponse {
  const plan = planOf(request(transcript));
  if (kind === "naive") {
    // The results of the latest turn: the naive model acts on what they say before anything else.
    const latest: ToolItem[] = [];
    for (let i = transcript.length - 1; i >= 0 && transcript[i]!.role === "tool"; i--) latest.unshift(transcript[i] as ToolItem);
    const turn = transcript.filter((t) => t.role === "assistant").length;
    const injected = latest
      .filter((r) => r.result.ok)
      .flatMap((r) => strings(r.result.ok ? r.result.data : null).flatMap((s) => instructionsIn(s, plan.task)))
      .slice(0, 8)
      .map((c, i) => ({ id: `inj_${turn}_${i}`, ...c }));
    if (injected.length > 0) return { kind: "tool_calls", calls: injected };
  }
  return nextPlanStep(plan, transcript);
}
