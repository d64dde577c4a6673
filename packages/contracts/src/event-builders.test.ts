import { describe, expect, it } from "vitest";
import { nextCallEvent, originOf, runEvent } from "./event-builders.js";
import { eventId, ToolgateEventSchema } from "./events.js";
import { newCallId, newRunId } from "./ids.js";
import { success } from "./result-envelope.js";

const principal = { tenant: "acme", subject: "alice", roles: ["analyst"] };
const tool = { name: "create_ticket", version: "1", hash: `sha256:${"a".repeat(64)}` };
const time = new Date("2024-11-29T10:00:00.000Z");

describe("event builders", () => {
  it("builds a call's events as valid envelopes with deterministic ids and increasing seq", () => {
    const callId = newCallId();
    const runId = newRunId();
    const proposed = nextCallEvent(
      { call_id: callId, run_id: runId, principal, seq: 0 },
      "proposed",
      "orchestrator",
      { provider_call_id: "toolu_1", tool_name: "create_ticket", arguments_json: "{}", context: {}, turn: 0 },
      { time },
    );
    const started = nextCallEvent(
      originOf(proposed),
      "started",
      "executor",
      { executor_id: "e1", idempotency_key_hash: `sha256:${"d".repeat(64)}` },
      {
        tool,
        args_hash: `sha256:${"b".repeat(64)}`,
        attempt: 2,
        time,
      },
    );
    const completed = nextCallEvent(originOf(started), "completed", "executor", { result: success(callId, []), duration_ms: 3 }, { attempt: 2, time });
    for (const event of [proposed, started, completed]) expect(ToolgateEventSchema.parse(event)).toEqual(event);
    expect([proposed.seq, started.seq, completed.seq]).toEqual([1, 2, 3]);
    expect(proposed.id).toBe(eventId(callId, "proposed", 1));
    expect(completed.id).toBe(eventId(callId, "completed", 2));
    expect(proposed).not.toHaveProperty("tool");
    // What the executor learned travels on to later events.
    expect(completed.tool).toEqual(tool);
    expect(completed.args_hash).toBe(started.args_hash);
    expect(completed.principal).toEqual(principal);
    // Building the same transition again gives the same id: a re-publish is deduplicated.
    expect(nextCallEvent(originOf(started), "completed", "executor", { result: success(callId, []), duration_ms: 9 }, { attempt: 2 }).id).toBe(completed.id);
  });

  it("builds run events numbered by their counter", () => {
    const run = { run_id: newRunId(), principal };
    const turn3 = runEvent(run, "model_responded", "orchestrator", 3, { turn: 3, outcome: "final", tool_calls: 0 }, time);
    expect(ToolgateEventSchema.parse(turn3)).toEqual(turn3);
    expect(turn3.id).toBe(eventId(run.run_id, "model_responded", 3));
    expect(turn3.id).not.toBe(runEvent(run, "model_responded", "orchestrator", 4, { turn: 4, outcome: "final", tool_calls: 0 }, time).id);
  });
});
