import type { CallId, Principal, ResultEnvelope, RunContext, RunId, TerminalCallEventType } from "@toolgate/contracts";
import { InsertBatcher, type InsertOutcome } from "@toolgate/storage";
import type { Collection, Db } from "mongodb";
import type { Budgets, StopReason, Usage } from "./budgets.js";
import type { ModelResponse } from "@toolgate/models";

/** A run's persisted state. `awaiting` says whose move it is: the model's or the tools'. */
export interface RunRecord {
  _id: RunId;
  principal: Principal;
  model: string;
  context: RunContext;
  input: string;
  /** `external`: the host runs its own loop and only hands over tool calls. */
  status: "running" | "completed" | "stopped" | "external";
  turn: number;
  awaiting: "model" | "tools" | "nothing";
  responses: { turn: number; response: ModelResponse; call_ids: CallId[] }[];
  tool_calls: number;
  budgets: Budgets;
  usage: Usage;
  final_text?: string;
  stop_reason?: string;
  created_at: Date;
  updated_at: Date;
}

/** One proposed call, persisted before it is published. */
export interface CallRecord {
  _id: CallId;
  run_id: RunId;
  turn: number;
  provider_call_id: string;
  tool_name: string;
  arguments_json: string;
  /** Position in the model's response. */
  order: number;
  /** Writes run one after another, each holding the locks of `resources`. */
  write: boolean;
  resources: string[];
  signature: string;
  /** Whether the run had received untrusted tool output when this call was proposed, and from which tools. */
  taint: { tainted: boolean; sources: string[] };
  created_at: Date;
}

/** A model turn's answer, recorded once: the first recorder wins, so a turn never runs two sets of calls. */
export interface TurnRecord {
  /** `<run_id>:<turn>` */
  _id: string;
  run_id: RunId;
  turn: number;
  response: ModelResponse;
  /** The calls of this response, so a restart can re-create anything not persisted before a crash. */
  calls: CallRecord[];
  tokens: number;
  at: Date;
}

/** A call waiting for a human approval (from its `approval_requested` event). */
export interface ApprovalWait {
  _id: CallId;
  run_id: RunId;
  approval_id: string;
  since: Date;
  expires_at: Date;
}

/** The terminal outcome attached to a call: inserted once, never updated. */
export interface CallResultRecord {
  _id: CallId;
  run_id: RunId;
  turn: number;
  provider_call_id: string;
  tool_name: string;
  terminal: TerminalCallEventType;
  result: ResultEnvelope;
  duration_ms?: number;
  attached_at: Date;
}

/**
 * How a managed run ended. Recorded once, in the run's end claim (the first of a completion and a stop wins),
 * and never updated: it is the authority on the run's end, which the run document mirrors.
 */
export type RunEnd = {
  /** The turn the run ended in: the number of its end event. */
  turn: number;
  final_text: string;
  tool_calls: number;
} & (
  | { status: "stopped"; stop_reason: StopReason }
  /** A completion's responses and usage, including its last turn; a stop leaves the run's as they are. */
  | { status: "completed"; responses: RunRecord["responses"]; usage: Usage }
);

/** Who plays a run's model turn (`<run_id>:<turn>`) or ends it (`<run_id>:end`): one claim per key. */
export interface TurnClaim {
  _id: string;
  run_id: RunId;
  turn: number;
  owner: string;
  at: Date;
  end?: RunEnd;
}

/** The fields of a run's progress that the loop updates turn by turn. */
export type RunProgress = Partial<Pick<RunRecord, "turn" | "awaiting" | "responses" | "usage" | "tool_calls">>;

/** The orchestrator's persistence: runs, calls and their attached results (append-only). */
export class RunStore {
  readonly runs: Collection<RunRecord>;
  readonly calls: Collection<CallRecord>;
  readonly results: Collection<CallResultRecord>;
  readonly turnClaims: Collection<TurnClaim>;
  readonly approvalWaits: Collection<ApprovalWait>;
  readonly turns: Collection<TurnRecord>;
  readonly #claimInserts: InsertBatcher<TurnClaim>;
  readonly #callInserts: InsertBatcher<CallRecord>;
  readonly #resultInserts: InsertBatcher<CallResultRecord>;
  readonly #runInserts: InsertBatcher<RunRecord>;

  constructor(db: Db) {
    this.runs = db.collection<RunRecord>("runs");
    this.calls = db.collection<CallRecord>("calls");
    this.results = db.collection<CallResultRecord>("call_results");
    this.turnClaims = db.collection<TurnClaim>("turn_claims");
    this.approvalWaits = db.collection<ApprovalWait>("approval_waits");
    this.turns = db.collection<TurnRecord>("turns");
    this.#claimInserts = new InsertBatcher(this.turnClaims);
    this.#callInserts = new InsertBatcher(this.calls);
    this.#resultInserts = new InsertBatcher(this.results);
    this.#runInserts = new InsertBatcher(this.runs);
  }

  async ensureIndexes(): Promise<void> {
    await this.calls.createIndex({ run_id: 1, turn: 1 });
    await this.results.createIndex({ run_id: 1, turn: 1 });
  }

  insertRun(run: RunRecord): Promise<InsertOutcome> {
    return this.#runInserts.insert(run);
  }

  /** Persists calls; resolves once all are durable (a redelivery finds them as duplicates). */
  async insertCalls(calls: CallRecord[]): Promise<void> {
    await Promise.all(calls.map((c) => this.#callInserts.insert(c)));
  }

  /** Attaches a terminal result; "duplicate" when the call already had one (the first one stands). */
  attachResult(result: CallResultRecord): Promise<InsertOutcome> {
    return this.#resultInserts.insert(result);
  }

  /**
   * Claims the right to play `turn` of a run. An insert on a unique key is the only compare-and-set that is
   * atomic on MongoDB and on FerretDB alike (FerretDB's conditional update is a read then a write).
   */
  async claimTurn(runId: RunId, turn: number, owner: string): Promise<boolean> {
    return (await this.#claimInserts.insert({ _id: `${runId}:${turn}`, run_id: runId, turn, owner, at: new Date() })) === "inserted";
  }

  /**
   * Ends a managed run unless it has ended already: true for the caller that ended it. The end is claimed by
   * insert first (atomic on MongoDB and FerretDB), then mirrored into the run document.
   */
  async endRun(runId: RunId, owner: string, end: RunEnd): Promise<boolean> {
    if ((await this.#claimInserts.insert({ _id: `${runId}:end`, run_id: runId, turn: end.turn, owner, at: new Date(), end })) !== "inserted") return false;
    await this.runs.updateOne({ _id: runId }, { $set: endFields(end) });
    return true;
  }

  /** How the run ended, if it has. */
  async endOf(runId: RunId): Promise<RunEnd | undefined> {
    return (await this.turnClaims.findOne({ _id: `${runId}:end` }))?.end;
  }

  /**
   * Records a running run's progress; returns the run's end if it has ended meanwhile. FerretDB applies an
   * update by reading the whole document and writing it back, so progress written while another process ends
   * the run can put `running` back over its end. Reading the end claim after every progress write, and
   * mirroring it again when there is one, closes that window: whichever write lands last, the end stands.
   */
  async recordProgress(runId: RunId, progress: RunProgress): Promise<RunEnd | undefined> {
    await this.runs.updateOne({ _id: runId, status: "running" }, { $set: { ...progress, updated_at: new Date() } });
    const end = await this.endOf(runId);
    if (end) await this.mirrorEnd(runId, end);
    return end;
  }

  /** Makes the run document say how the run ended (after a lost update or a crash between claim and write). */
  async mirrorEnd(runId: RunId, end: RunEnd): Promise<void> {
    await this.runs.updateOne({ _id: runId }, { $set: endFields(end) });
  }

  /** Records a turn's response; false when another process recorded this turn first. */
  async recordTurn(record: TurnRecord): Promise<boolean> {
    try {
      await this.turns.insertOne(record);
      return true;
    } catch (error) {
      if ((error as { code?: number }).code === 11000) return false;
      throw error;
    }
  }

  getTurn(runId: RunId, turn: number): Promise<TurnRecord | null> {
    return this.turns.findOne({ _id: `${runId}:${turn}` });
  }

  getRun(runId: RunId): Promise<RunRecord | null> {
    return this.runs.findOne({ _id: runId });
  }

  getCall(callId: CallId): Promise<CallRecord | null> {
    return this.calls.findOne({ _id: callId });
  }

  getResult(callId: CallId): Promise<CallResultRecord | null> {
    return this.results.findOne({ _id: callId });
  }

  callsOf(runId: RunId): Promise<CallRecord[]> {
    return this.calls.find({ run_id: runId }).sort({ created_at: 1 }).toArray();
  }

  resultsOf(runId: RunId): Promise<CallResultRecord[]> {
    return this.results.find({ run_id: runId }).toArray();
  }

  /** Which of `tools` returned a successful result in the run (reads only those results, not the whole run). */
  async succeededTools(runId: RunId, tools: readonly string[]): Promise<string[]> {
    if (tools.length === 0) return [];
    const rows = await this.results.find({ run_id: runId, tool_name: { $in: [...tools] }, "result.ok": true }, { projection: { tool_name: 1 } }).toArray();
    return [...new Set(rows.map((r) => r.tool_name))];
  }

  callsOfTurn(runId: RunId, turn: number): Promise<CallRecord[]> {
    return this.calls.find({ run_id: runId, turn }).toArray();
  }

  resultsOfTurn(runId: RunId, turn: number): Promise<CallResultRecord[]> {
    return this.results.find({ run_id: runId, turn }).toArray();
  }

  /** Records that a call waits for approval; the first record stands. */
  async recordApprovalWait(wait: ApprovalWait): Promise<void> {
    await this.approvalWaits.insertOne(wait).catch((error: { code?: number }) => {
      if (error.code !== 11000) throw error;
    });
  }

  /** Calls of a run waiting for approval that have no outcome yet. */
  async pendingApprovals(runId: RunId): Promise<ApprovalWait[]> {
    const waits = await this.approvalWaits.find({ run_id: runId }).toArray();
    if (waits.length === 0) return [];
    const done = new Set((await this.resultsOf(runId)).map((r) => r._id));
    return waits.filter((w) => !done.has(w._id));
  }

  countResults(runId: RunId, turn: number): Promise<number> {
    return this.results.countDocuments({ run_id: runId, turn });
  }
}

function endFields(end: RunEnd): Partial<RunRecord> {
  return {
    status: end.status,
    awaiting: "nothing",
    final_text: end.final_text,
    tool_calls: end.tool_calls,
    ...(end.status === "stopped" ? { stop_reason: end.stop_reason } : { responses: end.responses, usage: end.usage }),
    updated_at: new Date(),
  };
}
