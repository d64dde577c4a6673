import { callIdFloor, failure, newCallId, newRunId, success, type RunId } from "@toolgate/contracts";
import { testDatabase } from "@toolgate/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RunStore, SWEEP_SLOT_MS, sweepSlot, type CallRecord, type RunEnd, type RunRecord } from "./run-store.js";
import { runRecord } from "./test-fixtures.js";

let database: Awaited<ReturnType<typeof testDatabase>>;
let store: RunStore;

beforeAll(async () => {
  database = await testDatabase("tg_runs_");
  store = new RunStore(database.db);
  await store.ensureIndexes();
});
afterAll(async () => {
  await database.dispose();
});

const runningRun = (): RunRecord =>
  runRecord({
    budgets: { max_turns: 10, max_tool_calls: 10, max_wall_clock_ms: 1_000, max_tokens: 1_000, max_identical_calls: 3, max_approval_wait_ms: 1_000 },
  });

const stop = (turn: number): RunEnd => ({
  status: "stopped",
  turn,
  final_text: "the run exceeded its wall-clock budget",
  stop_reason: "budget_wall_clock",
  tool_calls: 0,
});

/**
 * A sweep stopping each run while its loop writes progress as fast as it can, until the stop is through.
 * Resolves when all are done.
 */
async function race(runIds: readonly RunId[], progress: (runId: RunId, turn: number) => Promise<unknown>): Promise<void> {
  await Promise.all(
    runIds.map(async (runId) => {
      let stopped = false;
      // Three writers keep a progress write in flight at every moment of the stop.
      const writers = [0, 1, 2].map(async (w) => {
        for (let turn = 1; !stopped || turn < 3; turn++) await progress(runId, 3 * turn + w);
      });
      await store.endRun(runId, "sweeper", stop(3));
      stopped = true;
      await Promise.all(writers);
    }),
  );
}

describe("a run's end", () => {
  it("is claimed once: the first of a completion and a stop wins, and the run document says which", async () => {
    const run = runningRun();
    await store.insertRun(run);
    const completion: RunEnd = { status: "completed", turn: 2, final_text: "done", responses: [], usage: { ...run.usage, turns: 3 }, tool_calls: 4 };
    const outcomes = await Promise.all([store.endRun(run._id, "loop", completion), store.endRun(run._id, "sweeper", stop(2))]);
    expect(outcomes.filter(Boolean)).toHaveLength(1);
    const winner = outcomes[0] ? completion : stop(2);
    expect(await store.endOf(run._id)).toEqual(winner);
    expect(await store.getRun(run._id)).toMatchObject({ status: winner.status, awaiting: "nothing", final_text: winner.final_text });
  });

  it("stands against progress written at the same moment, on a server whose updates rewrite the whole document", async () => {
    const runs = Array.from({ length: 200 }, runningRun);
    await Promise.all(runs.map((r) => store.insertRun(r)));
    await race(
      runs.map((r) => r._id),
      (runId, turn) => store.recordProgress(runId, { turn, awaiting: "model" }),
    );
    const after = await store.runs.find({ _id: { $in: runs.map((r) => r._id) } }, { sort: { _id: 1 } }).toArray();
    expect(after.map((r) => [r._id, r.status, r.stop_reason])).toEqual(runs.map((r) => [r._id, "stopped", "budget_wall_clock"]).sort());
    expect(after.every((r) => r.awaiting === "nothing")).toBe(true);
  });

  it("tells the writer of progress that the run ended, so the loop proposes nothing more", async () => {
    const run = runningRun();
    await store.insertRun(run);
    expect(await store.recordProgress(run._id, { turn: 1, awaiting: "model" })).toBeUndefined();
    await store.endRun(run._id, "sweeper", stop(1));
    expect(await store.recordProgress(run._id, { turn: 2, awaiting: "tools" })).toEqual(stop(1));
    // The ended run's progress is left as the end found it.
    expect(await store.getRun(run._id)).toMatchObject({ status: "stopped", awaiting: "nothing", turn: 1 });
  });

  it("is restored by mirrorEnd when the run document lost it (a crash between the claim and the write)", async () => {
    const run = runningRun();
    await store.insertRun(run);
    await store.endRun(run._id, "sweeper", stop(0));
    // What a lost update leaves behind: the claim says stopped, the document says running.
    await store.runs.updateOne({ _id: run._id }, { $set: { status: "running", awaiting: "model" } });
    await store.mirrorEnd(run._id, (await store.endOf(run._id))!);
    expect(await store.getRun(run._id)).toMatchObject({ status: "stopped", stop_reason: "budget_wall_clock", awaiting: "nothing" });
  });
});

/** A host call's record in `runId`, minted now unless given its id. */
const callRecord = (runId: RunId, turn: number, id: string = newCallId()): CallRecord => ({
  _id: id,
  run_id: runId,
  turn,
  provider_call_id: "toolu_1",
  tool_name: "search_sources",
  arguments_json: '{"query":"x"}',
  order: 0,
  write: false,
  resources: [],
  signature: "sha256:x",
  taint: { tainted: false, sources: [] },
  created_at: new Date(),
});

describe("a run's turns and outcomes", () => {
  const answer = (run: RunRecord, turn: number, calls: CallRecord[] = []) => ({
    run_id: run._id,
    turn,
    response: { kind: "tool_calls" as const, calls: calls.map((c) => ({ id: c.provider_call_id, name: c.tool_name, arguments: c.arguments_json })) },
    calls,
    tokens: 0,
    at: new Date(),
  });
  const call = (run: RunRecord, turn: number): CallRecord => callRecord(run._id, turn);

  it("records a turn's answer once, and a turn closed by the run's end is never answered", async () => {
    const run = runningRun();
    await store.insertRun(run);
    const first = call(run, 0);
    expect(await store.recordTurn(answer(run, 0, [first]))).toEqual({ kind: "recorded" });
    expect(await store.recordTurn(answer(run, 0))).toMatchObject({ kind: "recorded_before", first: { calls: [{ _id: first._id }] } });
    expect(await store.endRun(run._id, "sweeper", stop(0), [0, 1])).toBe(true);
    // The answered turn keeps its answer; the next one is closed.
    expect(await store.recordTurn(answer(run, 1))).toEqual({ kind: "closed" });
    expect((await store.turnsOf(run._id)).map((t) => t.turn)).toEqual([0]);
    expect(await store.getTurn(run._id, 1)).toBeNull();
  });

  it("keeps an outcome whose data has keys a document field cannot have", async () => {
    const run = runningRun();
    await store.insertRun(run);
    const c = call(run, 0);
    await store.insertCalls([c]);
    const data = { $schema: "https://json-schema.org/draft/2020-12/schema", $ref: "#/a", "a.b": { "": [1, { $where: "x" }] } };
    const result = { ok: true as const, data, retryable: false as const, call_id: c._id };
    expect(
      await store.attachResult({
        _id: c._id,
        run_id: run._id,
        turn: 0,
        provider_call_id: "toolu_1",
        tool_name: c.tool_name,
        terminal: "completed",
        result,
        attached_at: new Date(),
      }),
    ).toBe("inserted");
    expect((await store.getResult(c._id))?.result).toEqual(result);
    expect((await store.resultsOf(run._id)).map((r) => r.result)).toEqual([result]);
    expect(await store.succeededTools(run._id, ["search_sources", "fetch_document"])).toEqual(["search_sources"]);
  });

  it("says which untrusted tools succeeded in a run, whatever else the run holds", async () => {
    const run = runningRun();
    await store.insertRun(run);
    const attach = (tool: string, ok: boolean) => {
      const c = { ...call(run, 0), tool_name: tool };
      const result = ok ? { ok: true as const, data: {}, retryable: false as const, call_id: c._id } : failure(c._id, "EXECUTION_ERROR", "no");
      return store.attachResult({
        _id: c._id,
        run_id: run._id,
        turn: 0,
        provider_call_id: c.provider_call_id,
        tool_name: tool,
        terminal: "completed",
        result,
        attached_at: new Date(),
      });
    };
    const tools = ["search_sources", "fetch_document"];
    await Promise.all(Array.from({ length: 40 }, (_, i) => attach(i % 2 ? "save_evidence" : "fetch_document", i % 2 === 1)));
    // Only failures of an untrusted tool so far: nothing taints the run.
    expect(await store.succeededTools(run._id, tools)).toEqual([]);
    await attach("fetch_document", true);
    expect(await store.succeededTools(run._id, tools)).toEqual(["fetch_document"]);
    await Promise.all([attach("search_sources", true), attach("search_sources", true)]);
    expect((await store.succeededTools(run._id, tools)).sort()).toEqual(tools.sort());
    // Another run's results taint nothing here.
    expect(await store.succeededTools(runningRun()._id, tools)).toEqual([]);
    expect(await store.succeededTools(run._id, [])).toEqual([]);
  });

  it("finds a call by id, a host's on its own and a managed run's in the answer of its turn", async () => {
    const run = runningRun();
    await store.insertRun(run);
    const hosts = call(run, 0);
    const managed = call(run, 1);
    await store.insertCalls([hosts]);
    await store.recordTurn(answer(run, 1, [managed]));
    expect(await store.getCall(hosts._id)).toEqual(hosts);
    expect(await store.getCall(managed._id)).toEqual(managed);
    expect(await store.getCall(newCallId())).toBeNull();
    // The run's other steps (a turn's claim) hold no calls; each call comes back whole.
    expect(await store.claimTurn(run._id, 2, "orchestrator-1")).toBe(true);
    const byId = (a: { _id: string }, b: { _id: string }) => a._id.localeCompare(b._id);
    expect((await store.callsOf(run._id)).sort(byId)).toEqual([hosts, managed].sort(byId));
  });
});

describe("what the orphan sweep reads", () => {
  const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
  /** A call id minted at `ms`. */
  const callIdAt = (ms: number): string => callIdFloor(ms).slice(0, -16) + Array.from({ length: 16 }, () => CROCKFORD[Math.floor(Math.random() * 32)]).join("");
  it("reads the calls minted in a range slot by slot, in id order and at most a limit, and which of them have results", async () => {
    const runId = newRunId();
    // A past hour nothing else in this file mints ids in, spread over five slots.
    const base = (sweepSlot(Date.now()) - 720) * SWEEP_SLOT_MS;
    const offsets = [1_000, 9_999, 12_000, 25_000, 33_000, 47_000];
    const calls = offsets.map((o) => callRecord(runId, 0, callIdAt(base + o)));
    const before = callRecord(runId, 0, callIdAt(base - 1));
    await store.insertCalls([before, ...calls].reverse());
    const [after, below] = [callIdFloor(base), callIdFloor(base + 40_000)];
    const inRange = calls.filter((c) => c._id > after && c._id < below).map((c) => c._id);
    expect(inRange).toHaveLength(5);

    expect((await store.callsInSlotsBetween(after, below, 100)).map((c) => c._id)).toEqual(inRange);
    expect((await store.callsInSlotsBetween(after, below, 3)).map((c) => c._id)).toEqual(inRange.slice(0, 3));
    expect((await store.callsInSlotsBetween(inRange[2]!, below, 100)).map((c) => c._id)).toEqual(inRange.slice(3));
    // The range read (a process's first sweep) finds the same.
    expect((await store.callsWithIdsBetween(after, below, 100)).map((c) => c._id)).toEqual(inRange);

    for (const c of [calls[1]!, calls[3]!]) {
      await store.attachResult({
        _id: c._id,
        run_id: runId,
        turn: 0,
        provider_call_id: c._id,
        tool_name: c.tool_name,
        terminal: "completed",
        result: success(c._id, {}),
        attached_at: new Date(),
      });
    }
    const ids = calls.map((c) => c._id);
    expect([...(await store.resultIds(ids))].sort()).toEqual([calls[1]!._id, calls[3]!._id].sort());
    expect([...(await store.resultIds(ids, true))].sort()).toEqual([calls[1]!._id, calls[3]!._id].sort());
  });

  it("finds a call stored without a slot (by an earlier release) only by range", async () => {
    const base = (sweepSlot(Date.now()) - 900) * SWEEP_SLOT_MS;
    const old = callRecord(newRunId(), 0, callIdAt(base + 5_000));
    await store.calls.insertOne(old);
    const [after, below] = [callIdFloor(base), callIdFloor(base + 10_000)];
    expect(await store.callsInSlotsBetween(after, below, 10)).toEqual([]);
    expect((await store.callsWithIdsBetween(after, below, 10)).map((c) => c._id)).toEqual([old._id]);
  });

  it("reads the turn answers recorded in a range slot by slot, oldest first", async () => {
    const runId = newRunId();
    const base = (sweepSlot(Date.now()) - 1_000) * SWEEP_SLOT_MS;
    const times = [2_000, 15_000, 16_000, 31_000];
    for (const [turn, t] of times.entries()) {
      await store.recordTurn({ run_id: runId, turn, response: { kind: "tool_calls", calls: [] }, calls: [], tokens: 0, at: new Date(base + t) });
    }
    const answers = await store.answersRecordedBetween(new Date(base + 2_000), new Date(base + 31_000), 100);
    expect(answers.filter((a) => a.run_id === runId).map((a) => a.turn)).toEqual([0, 1, 2]);
    expect((await store.answersRecordedBetween(new Date(base), new Date(base + 40_000), 2)).map((a) => a.turn)).toEqual([0, 1]);
  });
});
