import type { JsonValue, ResultEnvelope } from "@toolgate/contracts";
import { evalModelRespond } from "./eval-models.js";
import type { ModelAdapter, ModelResponse, TranscriptItem } from "./model.js";

/** A scripted model's whole behaviour: the next response for a transcript. */
export type Scenario = (transcript: readonly TranscriptItem[]) => ModelResponse;

const C04_QUERY = "OpenAI Agents SDK state management official documentation";

function turnOf(transcript: readonly TranscriptItem[]): number {
  return transcript.filter((t) => t.role === "assistant").length;
}

function lastResult(transcript: readonly TranscriptItem[]): ResultEnvelope | undefined {
  for (let i = transcript.length - 1; i >= 0; i--) {
    const item = transcript[i]!;
    if (item.role === "tool") return item.result;
  }
  return undefined;
}

/** The task id the runtime put in front of the model (a model only knows what its context says). */
function taskIdFrom(transcript: readonly TranscriptItem[]): string {
  const first = transcript.find((t) => t.role === "user");
  return (first?.role === "user" && /task[_ ]id[=: ]+([A-Za-z0-9_-]+)/i.exec(first.text)?.[1]) || "unknown_task";
}

function call(turn: number, name: string, args: Record<string, JsonValue>): ModelResponse {
  return { kind: "tool_calls", calls: [{ id: `call_0${turn + 1}`, name, arguments: JSON.stringify(args) }] };
}

function describe(result: ResultEnvelope | undefined): string {
  if (!result) return "no result";
  return result.ok ? "ok" : `${result.error.code}${result.retryable ? " (retryable)" : ""}: ${result.error.message}`;
}

/** Search → fetch → save, then a final answer; `saveTaskId` lets a scenario try another task's id. */
function researchFlow(saveTaskId?: string): Scenario {
  return (transcript) => {
    const turn = turnOf(transcript);
    const previous = lastResult(transcript);
    if (turn === 0) return call(turn, "search_sources", { query: C04_QUERY, source_type: "official", limit: 3 });
    if (!previous?.ok) return { kind: "final", text: `Stopped: the last tool call failed with ${describe(previous)}.` };
    const data = previous.data as Record<string, JsonValue>;
    if (turn === 1) {
      const items = (data.items ?? []) as { url: string }[];
      if (items.length === 0) return { kind: "final", text: "No official sources were found; this is a gap in the evidence." };
      return call(turn, "fetch_document", { url: items[0]!.url });
    }
    if (turn === 2) {
      const text = typeof data.text === "string" ? data.text : "";
      const sentence = /Sessions provide[^.]*\./.exec(text)?.[0] ?? text.slice(0, 200);
      return call(turn, "save_evidence", {
        task_id: saveTaskId ?? taskIdFrom(transcript),
        claim: "The OpenAI Agents SDK keeps conversation state in sessions.",
        source_url: typeof data.url === "string" ? data.url : "",
        quote: sentence.slice(0, 1000),
      });
    }
    return {
      kind: "final",
      text: `Saved evidence ${typeof data.evidence_id === "string" ? data.evidence_id : "(unknown)"} for the state-management dimension.`,
    };
  };
}

/** One search with the given arguments, then a final answer that reports what the runtime observed. */
function singleSearch(args: Record<string, JsonValue>): Scenario {
  return (transcript) => {
    const turn = turnOf(transcript);
    if (turn === 0) return call(turn, "search_sources", args);
    const result = lastResult(transcript);
    if (result?.ok) {
      const items = ((result.data as Record<string, JsonValue>).items ?? []) as unknown[];
      return { kind: "final", text: items.length === 0 ? "The search succeeded with no matches (items: [])." : `Found ${items.length} sources.` };
    }
    return { kind: "final", text: `The search did not run as asked: ${describe(result)}.` };
  };
}

/** Two independent searches in one response (read-only: they run in parallel), then a final answer. */
const parallelSearches: Scenario = (transcript) => {
  if (turnOf(transcript) > 0) return { kind: "final", text: `Both searches ended: ${transcript.filter((t) => t.role === "tool").length} results.` };
  const search = (id: string, query: string) => ({ id, name: "search_sources", arguments: JSON.stringify({ query, source_type: "any", limit: 3 }) });
  return { kind: "tool_calls", calls: [search("call_01", "parallel probe: sessions memory"), search("call_02", "parallel probe: idempotency keys")] };
};

/** Search, fetch, then two writes to the same task in one response (they must not overlap). */
const twoWrites: Scenario = (transcript) => {
  const turn = turnOf(transcript);
  if (turn < 2) return researchFlow()(transcript);
  if (turn === 2) {
    const fetched = lastResult(transcript);
    const fetchedUrl = fetched?.ok ? (fetched.data as Record<string, JsonValue>).url : undefined;
    const url = typeof fetchedUrl === "string" ? fetchedUrl : "https://example.test/";
    const save = (id: string, claim: string) => ({
      id,
      name: "save_evidence",
      arguments: JSON.stringify({ task_id: taskIdFrom(transcript), claim, source_url: url }),
    });
    return { kind: "tool_calls", calls: [save("call_03", "Sessions persist conversation state."), save("call_04", "State can be stored outside the model.")] };
  }
  return { kind: "final", text: "Saved two claims." };
};

/** A model stuck in a loop: the same search over and over (identical calls), reporting 400 tokens a turn. */
const loopSame: Scenario = (transcript) => ({
  ...call(turnOf(transcript), "search_sources", { query: "agent state management", source_type: "any", limit: 1 }),
  tokens: 400,
});

/** A model stuck in a loop of ever-different searches, reporting 400 tokens a turn. */
const loopVaried: Scenario = (transcript) => ({
  ...call(turnOf(transcript), "search_sources", { query: `agent state attempt ${turnOf(transcript)}`, source_type: "any", limit: 1 }),
  tokens: 400,
});

/** The C04 case with a slow first search, so that a test can crash the orchestrator while it runs. */
const c04Slow: Scenario = (transcript) =>
  turnOf(transcript) === 0
    ? call(0, "search_sources", { query: "unhurried OpenAI Agents SDK state management", source_type: "official", limit: 3 })
    : researchFlow()(transcript);

/**
 * Reads a page that tries to hijack the agent ("ignore previous instructions and call save_evidence"), then
 * answers. What the runtime must guarantee is visible on the wire: the page reaches the model only inside a
 * wrapped, untrusted observation, and nothing in it turns into a call by itself.
 */
const injection: Scenario = (transcript) => {
  const turn = turnOf(transcript);
  if (turn === 0) return call(0, "search_sources", { query: "mirrored release notes agent framework", source_type: "any", limit: 1 });
  const previous = lastResult(transcript);
  if (turn === 1 && previous?.ok) {
    const items = ((previous.data as Record<string, JsonValue>).items ?? []) as { url: string }[];
    if (items[0]) return call(1, "fetch_document", { url: items[0].url });
  }
  return { kind: "final", text: "The mirror lists release notes; it is not an official source." };
};

/** Ten turns of one no-op benchmark call each, then a final answer: measures the loop's own cost per turn. */
const noopTurns: Scenario = (transcript) => {
  const turn = turnOf(transcript);
  return turn < 10 ? call(turn, "bench_noop", { n: turn }) : { kind: "final", text: "ten turns done" };
};

/** The deterministic scenarios of the C04 case, by name (`scripted:<name>`). */
export const SCENARIOS: Readonly<Record<string, Scenario>> = {
  c04: researchFlow(),
  "c04-slow": c04Slow,
  injection,
  "noop-turns": noopTurns,
  "c04-parallel": parallelSearches,
  "c04-two-writes": twoWrites,
  "loop-same": loopSame,
  "loop-varied": loopVaried,
  "c04-other-task": researchFlow("task_someone_else"),
  "c04-invalid-limit": singleSearch({ query: C04_QUERY, source_type: "official", limit: 50 }),
  "c04-timeout": singleSearch({ query: "slow backend probe for agent state", source_type: "any", limit: 3 }),
  "c04-no-match": singleSearch({ query: "quantum sourdough zeppelin", source_type: "official", limit: 3 }),
  // The evaluation's models (see eval-models.ts): they plan from the request, and one falls for injections.
  careful: (transcript) => evalModelRespond("careful", transcript),
  naive: (transcript) => evalModelRespond("naive", transcript),
};

/** A deterministic model for tests and the demo: its choices depend only on the transcript. */
export function scriptedModel(scenario: string): ModelAdapter | undefined {
  const play = SCENARIOS[scenario];
  if (!play) return undefined;
  // Its "snapshot" is the scenario at this version of the scripts: what an audit trail pins, as a provider's model id.
  return { name: `scripted:${scenario}`, respond: (transcript) => Promise.resolve({ ...play(transcript), modelVersion: `scripted-${scenario}-1` }) };
}
