import type { RunId } from "@toolgate/contracts";
import { describe, expect, it } from "vitest";
import type { ActiveRun } from "./loop-state.js";
import type { CallRecord, RunRecord, TurnRecord } from "./run-store.js";
import { applyAnswer, runAt } from "./turn-player.js";

const runId = "run_01JDQ3JZ4E7W8A2B9C5D6F0G1H" as RunId;
const run: RunRecord = {
  _id: runId,
  principal: { tenant: "acme", subject: "alice", roles: [] },
  model: "scripted:x",
  context: {},
  input: "",
  status: "running",
  turn: 0,
  awaiting: "model",
  responses: [],
  tool_calls: 0,
  budgets: { max_turns: 10, max_tool_calls: 10, max_wall_clock_ms: 1_000, max_tokens: 1_000, max_identical_calls: 3, max_approval_wait_ms: 1_000 },
  usage: { turns: 0, tool_calls: 0, tokens: 0, signatures: {} },
  created_at: new Date(0),
  updated_at: new Date(0),
};
const call = (id: string, turn: number, signature = "sig"): CallRecord => ({
  _id: id,
  run_id: runId,
  turn,
  provider_call_id: id,
  tool_name: "bench_noop",
  arguments_json: "{}",
  order: 0,
  write: false,
  resources: [],
  signature,
  taint: { tainted: false, sources: [] },
  created_at: new Date(0),
});
const answer = (turn: number, calls: CallRecord[], tokens = 10): TurnRecord => ({
  _id: `${runId}:${turn}:answer`,
  kind: "answer",
  run_id: runId,
  turn,
  response: { kind: "tool_calls", calls: calls.map((c) => ({ id: c.provider_call_id, name: c.tool_name, arguments: c.arguments_json })) },
  calls,
  call_id: calls.map((c) => c._id),
  tokens,
  at: new Date(0),
});

describe("runAt", () => {
  it("rebuilds a run at its latest claimed turn from the answers before it, whatever its document says", () => {
    const turns = [answer(0, [call("a", 0), call("b", 0, "other")]), answer(1, [call("c", 1)]), answer(2, [call("d", 2)])];
    const rebuilt = runAt({ ...run, turn: 0, awaiting: "tools" }, turns, 2);
    expect(rebuilt).toMatchObject({ turn: 2, awaiting: "model", tool_calls: 3 });
    expect(rebuilt.usage).toEqual({ turns: 2, tool_calls: 3, tokens: 20, signatures: { sig: 2, other: 1 } });
    expect(rebuilt.responses.map((r) => [r.turn, r.call_ids])).toEqual([
      [0, ["a", "b"]],
      [1, ["c"]],
    ]);
  });

  it("applies the latest turn's answer on top, as the loop would have", () => {
    const turns = [answer(0, [call("a", 0)]), answer(1, [call("c", 1)])];
    const active: ActiveRun = { run: runAt(run, turns, 1), results: new Map(), calls: [] };
    applyAnswer(active, turns[1]!.response, turns[1]!.calls, turns[1]!.tokens, new Date(5));
    expect(active.run).toMatchObject({ turn: 1, awaiting: "tools", tool_calls: 2, usage: { turns: 2, tool_calls: 2, tokens: 20 } });
    expect(active.calls.map((c) => c._id)).toEqual(["c"]);
    // The same as rebuilding one turn later and applying nothing: the document and memory agree.
    expect(runAt(run, turns, 2).usage).toEqual(active.run.usage);
  });
});
