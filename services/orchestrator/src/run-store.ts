import { idTime, type CallId, type Principal, type ResultEnvelope, type RunContext, type RunId, type TerminalCallEventType } from "@toolgate/contracts";
import { InsertBatcher, type InsertOutcome } from "@toolgate/storage";
import type { Collection, Db, Document } from "mongodb";
import type { Budgets, StopReason, Usage } from "./budgets.js";
import type { ModelResponse } from "@toolgate/models";
import type { HostCallKey } from "./host-call-keys.js";

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
  /** `<run_id>:<turn>:answer` */
  _id: string;
  kind: "answer";
  run_id: RunId;
  turn: number;
  response: ModelResponse;
  /** The calls of this response, so a restart can re-create anything not persisted before a crash. */
  calls: CallRecord[];
  /** Their ids, so that a call is found by id in the turn that proposed it (an indexed list). */
  call_id: CallId[];
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
} &
  /** A stop's responses and usage, when the process that stopped the run knew them (it drove the run). */
  (
    | { status: "stopped"; stop_reason: StopReason; responses?: RunRecord["responses"]; usage?: Usage }
    /** A completion's responses and usage, including its last turn; a stop leaves the run's as they are. */
    | { status: "completed"; responses: RunRecord["responses"]; usage: Usage }
  );

/**
 * How an outcome is kept: the result envelope and the call as JSON text. Tool data is untrusted and may hold
 * keys such as "$ref" or "a.b", which a document field cannot (FerretDB refuses them, MongoDB restricts them);
 * and a field of text costs FerretDB far less to store than the fields it would otherwise be.
 */
interface StoredResult {
  _id: CallId;
  run_id: RunId;
  turn: number;
  provider_call_id: string;
  tool_name: string;
  terminal: TerminalCallEventType;
  /** The envelope's `ok`, for the queries that ask which tools succeeded (taint). */
  ok: boolean;
  result_json: string;
  duration_ms?: number;
  attached_at: Date;
  /** The call itself, when it has no record of its own (see {@link RunStore.attachResult}), as JSON text. */
  call_json?: string;
  /** The sweep slot of the call's id, written by earlier releases (the sweep reads results by id now). */
  sweep_slot?: number;
}

function storedResult({ result, ...rest }: CallResultRecord, call: CallRecord | undefined): StoredResult {
  return { ...rest, ok: result.ok, result_json: JSON.stringify(result), ...(call ? { call_json: JSON.stringify(call) } : {}) };
}

function resultOf({ ok: _ok, result_json, sweep_slot: _slot, call_json: _call, ...rest }: StoredResult): CallResultRecord {
  return { ...rest, result: JSON.parse(result_json) as ResultEnvelope };
}

/** The call a result holds because it had no record of its own. */
function embeddedCall(stored: Pick<StoredResult, "call_json">): CallRecord | undefined {
  if (stored.call_json === undefined) return undefined;
  const call = JSON.parse(stored.call_json) as Omit<CallRecord, "created_at"> & { created_at: string };
  return { ...call, created_at: new Date(call.created_at) };
}

/** Results keep the call they hold out of what readers of outcomes get. */
const WITHOUT_CALL = { projection: { call_json: 0 } } as const;

/** Who plays a run's model turn: one claim per turn, `<run_id>:<turn>`. */
export interface TurnClaim {
  _id: string;
  kind: "claim";
  run_id: RunId;
  turn: number;
  owner: string;
  at: Date;
}

/** A turn that will never be answered: the run ended first (`<run_id>:<turn>:answer`, like the answer it bars). */
export interface TurnClosed {
  _id: string;
  kind: "closed";
  run_id: RunId;
  turn: number;
  at: Date;
}

/** How a run ended, claimed once (`<run_id>:end`): the first of a completion and a stop wins. */
export interface EndClaim {
  _id: string;
  kind: "end";
  run_id: RunId;
  turn: number;
  owner: string;
  at: Date;
  end: RunEnd;
}

/**
 * The steps of a managed run, each an insert on a unique id, so that each is claimed once on MongoDB and on
 * FerretDB alike (FerretDB's conditional updates are a read and a write): who plays a turn, what the model
 * answered in it (or that it was closed by the run's end), and how the run ended. One collection, so that a
 * turn's claim and answer, or an end and the turns it closes, are written by one command.
 */
export type RunStep = TurnClaim | TurnRecord | TurnClosed | EndClaim;

/** What recording a turn's answer found: this one recorded, another recorder's first, or the run ended. */
export type TurnRecording = { kind: "recorded" } | { kind: "recorded_before"; first: TurnRecord } | { kind: "closed" };

const answerId = (runId: RunId, turn: number): string => `${runId}:${turn}:answer`;

/**
 * The orphan sweep reads what was recorded since its last look. A range of ids or times is a scan of the whole
 * collection on FerretDB (it pushes down equality only), so host calls, their results and turn answers carry the
 * slot of when they were minted (calls, results: from the call id; answers: when recorded), and a sweep reads
 * the few slots it covers, each an indexed equality: what it reads grows with what was recorded since, never
 * with the collection.
 */
export const SWEEP_SLOT_MS = 10_000;

/** The sweep slot of an epoch-ms time. */
export const sweepSlot = (ms: number): number => Math.floor(ms / SWEEP_SLOT_MS);

/** The sweep slot of a call id (its mint time); 0 for an id that carries none. */
const slotOfId = (id: string): number => sweepSlot(idTime(id) ?? 0);

/** Slots read side by side when a sweep covers many (the first after a start looks back an hour: 360). */
const SLOT_READS_IN_PARALLEL = 8;

/** Results looked up by id side by side. */
const ID_READS_IN_PARALLEL = 16;

/** Reads records without their sweep slot: it is the store's, not the record's. */
const UNSLOTTED = { projection: { sweep_slot: 0 } } as const;

/** A host call as stored: its record and, when it was recorded before its proposal landed, its sweep slot. */
type StoredCall = CallRecord & { sweep_slot?: number };

/** A step as stored: a turn answer also carries its sweep slot. */
type StoredStep = RunStep | (TurnRecord & { sweep_slot: number });

/** The fields of a run's progress that the loop updates turn by turn. */
export type RunProgress = Partial<Pick<RunRecord, "turn" | "awaiting" | "responses" | "usage" | "tool_calls">>;

/** The orchestrator's persistence: runs, calls and their attached results (append-only). */
export class RunStore {
  readonly runs: Collection<RunRecord>;
  readonly calls: Collection<StoredCall>;
  readonly results: Collection<StoredResult>;
  readonly steps: Collection<StoredStep>;
  readonly approvalWaits: Collection<ApprovalWait>;
  /** Provider call ids claimed by releases that kept them here, read for runs older than the ledger (see HostCallKeys). */
  readonly hostCallKeys: Collection<HostCallKey>;
  readonly #stepInserts: InsertBatcher<StoredStep>;
  readonly #callInserts: InsertBatcher<StoredCall>;
  readonly #resultInserts: InsertBatcher<StoredResult>;
  readonly #runInserts: InsertBatcher<RunRecord>;

  constructor(db: Db) {
    this.runs = db.collection<RunRecord>("runs");
    this.calls = db.collection<StoredCall>("calls");
    this.results = db.collection<StoredResult>("call_results");
    this.steps = db.collection<StoredStep>("run_steps");
    this.approvalWaits = db.collection<ApprovalWait>("approval_waits");
    this.hostCallKeys = db.collection<HostCallKey>("host_call_keys");
    this.#stepInserts = new InsertBatcher(this.steps);
    this.#callInserts = new InsertBatcher(this.calls);
    this.#resultInserts = new InsertBatcher(this.results);
    this.#runInserts = new InsertBatcher(this.runs);
  }

  async ensureIndexes(): Promise<void> {
    await this.calls.createIndex({ run_id: 1, turn: 1 });
    await this.results.createIndex({ run_id: 1, turn: 1 });
    // Whether an untrusted tool succeeded in a run is asked before each host submission: one indexed lookup per
    // tool, however many results the run holds.
    await this.results.createIndex({ run_id: 1, tool_name: 1 });
    await this.steps.createIndex({ run_id: 1 });
    await this.steps.createIndex({ call_id: 1 });
    // The orphan sweep reads what was recorded since its last look, slot by slot (see SWEEP_SLOT_MS), and by
    // range after a start (on MongoDB an indexed range: calls by _id, answers by `at`).
    await this.steps.createIndex({ at: 1 });
    await this.calls.createIndex({ sweep_slot: 1 });
    await this.steps.createIndex({ sweep_slot: 1 });
    // Results are looked up by id now; an index every attach paid for and nothing reads goes.
    await dropIndexIfPresent(this.results, "sweep_slot_1");
    // A run's calls waiting for approval are looked up by run (at the end of every tools turn).
    await this.approvalWaits.createIndex({ run_id: 1 });
    // Restarts and full sweeps look for the runs still running; the rest of the collection only grows.
    await this.runs.createIndex({ status: 1 });
  }

  insertRun(run: RunRecord): Promise<InsertOutcome> {
    return this.#runInserts.insert(run);
  }

  /**
   * Persists calls; resolves once all are durable (a redelivery finds them as duplicates). Calls whose proposals
   * are in the stream already (`proposed`) are kept out of the orphan sweep's slots: it never reads them back.
   */
  async insertCalls(calls: CallRecord[], { proposed = false }: { proposed?: boolean } = {}): Promise<void> {
    await Promise.all(calls.map((c) => this.#callInserts.insert(proposed ? c : { ...c, sweep_slot: slotOfId(c._id) })));
  }

  /**
   * Attaches a terminal result; "duplicate" when the call already had one (the first one stands). `call`: the
   * call, stored with its outcome because it has no record of its own (a call without side effects that ended
   * before its record was needed): one document for the call and its outcome.
   */
  attachResult(result: CallResultRecord, call?: CallRecord): Promise<InsertOutcome> {
    return this.#resultInserts.insert(storedResult(result, call));
  }

  /**
   * Claims the right to play `turn` of a run. An insert on a unique key is the only compare-and-set that is
   * atomic on MongoDB and on FerretDB alike (FerretDB's conditional update is a read then a write).
   */
  async claimTurn(runId: RunId, turn: number, owner: string): Promise<boolean> {
    return (await this.#stepInserts.insert({ _id: `${runId}:${turn}`, kind: "claim", run_id: runId, turn, owner, at: new Date() })) === "inserted";
  }

  /**
   * Ends a managed run unless it has ended already: true for the caller that ended it. The end is claimed by
   * insert (atomic on MongoDB and FerretDB), together with closing the answers of `closeTurns` (so that a turn
   * being played meanwhile finds its answer taken and proposes nothing), then mirrored into the run document.
   */
  async endRun(runId: RunId, owner: string, end: RunEnd, closeTurns: readonly number[] = []): Promise<boolean> {
    const at = new Date();
    const [claimed] = await Promise.all([
      this.#stepInserts.insert({ _id: `${runId}:end`, kind: "end", run_id: runId, turn: end.turn, owner, at, end }),
      ...closeTurns.map((turn) => this.#stepInserts.insert({ _id: answerId(runId, turn), kind: "closed", run_id: runId, turn, at })),
    ]);
    if (claimed !== "inserted") return false;
    await this.runs.updateOne({ _id: runId }, { $set: endFields(end) });
    return true;
  }

  /** How the run ended, if it has. */
  async endOf(runId: RunId): Promise<RunEnd | undefined> {
    const step = await this.steps.findOne({ _id: `${runId}:end` });
    return step?.kind === "end" ? step.end : undefined;
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

  /**
   * Records a turn's answer unless another recorder did first (its answer is returned) or the run ended before
   * it (the turn was closed). Goes out with whatever else the run's steps write at that moment (the turn's claim).
   */
  async recordTurn(record: Omit<TurnRecord, "_id" | "kind" | "call_id">): Promise<TurnRecording> {
    const _id = answerId(record.run_id, record.turn);
    const answer = { ...record, _id, kind: "answer" as const, call_id: record.calls.map((c) => c._id), sweep_slot: sweepSlot(record.at.getTime()) };
    if ((await this.#stepInserts.insert(answer)) === "inserted") return { kind: "recorded" };
    const first = await this.steps.findOne({ _id }, UNSLOTTED);
    if (first?.kind === "answer") return { kind: "recorded_before", first };
    // Closed by the run's end (or, for a moment, neither: purged with the run). Either way nothing is proposed.
    return { kind: "closed" };
  }

  /** A turn's recorded answer, if the model gave one (and the turn was not closed by the run's end). */
  async getTurn(runId: RunId, turn: number): Promise<TurnRecord | null> {
    const step = await this.steps.findOne({ _id: answerId(runId, turn) }, UNSLOTTED);
    return step?.kind === "answer" ? step : null;
  }

  /** Every recorded answer of a run, in turn order: what the model answered and which calls each answer made. */
  async turnsOf(runId: RunId): Promise<TurnRecord[]> {
    return (await this.steps.find({ run_id: runId }, UNSLOTTED).toArray()).filter((s): s is TurnRecord => s.kind === "answer").sort((a, b) => a.turn - b.turn);
  }

  /**
   * The highest model turn of a run anyone has claimed, probing claims by id upward from `from` (a turn known
   * to be claimed: the run document, written behind the claims, never runs ahead of them).
   */
  async latestClaimedTurn(runId: RunId, from: number): Promise<number> {
    let turn = from;
    while (await this.steps.findOne({ _id: `${runId}:${turn + 1}` }, { projection: { _id: 1 } })) turn += 1;
    return turn;
  }

  /** Ids of the runs whose documents say they are running (an indexed lookup, not a scan). */
  async runningRunIds(): Promise<RunId[]> {
    return (await this.runs.find({ status: "running" }, { projection: { _id: 1 } }).toArray()).map((r) => r._id);
  }

  getRun(runId: RunId): Promise<RunRecord | null> {
    return this.runs.findOne({ _id: runId });
  }

  /**
   * A call's record: a host's call on its own or with its outcome, a managed run's in the answer of the turn that
   * proposed it.
   */
  async getCall(callId: CallId): Promise<CallRecord | null> {
    const [own, turn, withOutcome] = await Promise.all([
      this.calls.findOne({ _id: callId }, UNSLOTTED),
      this.steps.findOne({ call_id: callId }),
      this.results.findOne({ _id: callId }, { projection: { call_json: 1 } }),
    ]);
    return own ?? (turn?.kind === "answer" ? turn.calls.find((c) => c._id === callId) : undefined) ?? (withOutcome && embeddedCall(withOutcome)) ?? null;
  }

  async getResult(callId: CallId): Promise<CallResultRecord | null> {
    const stored = await this.results.findOne({ _id: callId }, WITHOUT_CALL);
    return stored ? resultOf(stored) : null;
  }

  /**
   * The calls of a run, oldest first: a host's on their own or with their outcomes, a managed run's in the answers
   * of its turns.
   */
  async callsOf(runId: RunId): Promise<CallRecord[]> {
    return (await this.callsAndResultsOf(runId)).calls;
  }

  async resultsOf(runId: RunId): Promise<CallResultRecord[]> {
    return (await this.results.find({ run_id: runId }, WITHOUT_CALL).toArray()).map(resultOf);
  }

  /** A run's calls (as {@link callsOf}) and results (as {@link resultsOf}), each collection read once. */
  async callsAndResultsOf(runId: RunId): Promise<{ calls: CallRecord[]; results: CallResultRecord[] }> {
    // Only the calls of the run's answers: not its turn claims or end, nor the model's responses.
    const [own, turns, stored] = await Promise.all([
      this.calls.find({ run_id: runId }, UNSLOTTED).toArray(),
      this.steps.find<Pick<TurnRecord, "calls">>({ run_id: runId, kind: "answer" }, { projection: { _id: 0, calls: 1 } }).toArray(),
      this.results.find({ run_id: runId }).toArray(),
    ]);
    const byId = new Map<CallId, CallRecord>();
    for (const call of [...turns.flatMap((t) => t.calls), ...stored.flatMap((r) => embeddedCall(r) ?? []), ...own]) byId.set(call._id, call);
    const calls = [...byId.values()].sort((a, b) => a.created_at.getTime() - b.created_at.getTime() || a.order - b.order);
    return { calls, results: stored.map(resultOf) };
  }

  /**
   * Which of `tools` returned a successful result in the run: one lookup of at most one result per tool, on the
   * (run, tool) index — never every result of the run (a host-driven run grows without bound, and a list of
   * names is not pushed down to FerretDB's indexes).
   */
  async succeededTools(runId: RunId, tools: readonly string[]): Promise<string[]> {
    const found = await Promise.all(
      [...new Set(tools)].map(async (tool) =>
        (await this.results.findOne({ run_id: runId, tool_name: tool, ok: true }, { projection: { _id: 1 } })) ? tool : undefined,
      ),
    );
    return found.filter((tool): tool is string => tool !== undefined);
  }

  /**
   * Host calls with ids above `after` and below `below`, in id order (call ids sort by the time they were
   * minted), at most `limit`: a range of the primary key. A scan of the whole collection on FerretDB: the orphan
   * sweep uses it after a start until it has caught up (records stored before they carried a sweep slot), and
   * {@link callsInSlotsBetween} after that.
   */
  callsWithIdsBetween(after: CallId, below: CallId, limit: number): Promise<CallRecord[]> {
    return this.calls
      .find({ _id: { $gt: after, $lt: below } }, UNSLOTTED)
      .sort({ _id: 1 })
      .limit(limit)
      .toArray();
  }

  /** {@link callsWithIdsBetween}, read slot by slot: what it reads grows with the calls minted in the range. */
  async callsInSlotsBetween(after: CallId, below: CallId, limit: number): Promise<CallRecord[]> {
    const found: CallRecord[] = [];
    await forSlots(
      slotOfId(after),
      slotOfId(below),
      () => found.length >= limit,
      async (slot) => {
        const rows = await this.calls.find({ sweep_slot: slot }, UNSLOTTED).toArray();
        return () => found.push(...rows.filter((c) => c._id > after && c._id < below).sort((a, b) => (a._id < b._id ? -1 : 1)));
      },
    );
    return found.slice(0, limit);
  }

  /**
   * Managed runs' turn answers recorded at or after `from` and before `upTo`, oldest first, at most `limit`. Read
   * slot by slot, or by range when `legacy` (after a start, until caught up: answers recorded before they
   * carried a slot).
   */
  async answersRecordedBetween(from: Date, upTo: Date, limit: number, legacy = false): Promise<TurnRecord[]> {
    const inRange = (s: StoredStep): s is TurnRecord => s.kind === "answer" && s.at >= from && s.at < upTo;
    if (legacy) {
      const steps = await this.steps
        .find({ at: { $gte: from, $lt: upTo }, kind: "answer" }, UNSLOTTED)
        .sort({ at: 1 })
        .limit(limit)
        .toArray();
      return steps.filter(inRange);
    }
    const found: TurnRecord[] = [];
    await forSlots(
      sweepSlot(from.getTime()),
      sweepSlot(upTo.getTime()),
      () => found.length >= limit,
      async (slot) => {
        const rows = await this.steps.find({ sweep_slot: slot, kind: "answer" }, UNSLOTTED).toArray();
        return () => found.push(...rows.filter(inRange).sort((a, b) => a.at.getTime() - b.at.getTime()));
      },
    );
    return found.slice(0, limit);
  }

  /**
   * Which of `callIds` have their outcome attached: each looked up by id (an indexed equality; the sweep asks about
   * the few calls recorded before their proposals landed), or all at once by a list of ids when `legacy` (a scan
   * on FerretDB: the sweeps after a start, which read every call recorded since the lookback).
   */
  async resultIds(callIds: readonly CallId[], legacy = false): Promise<Set<CallId>> {
    if (legacy) {
      const rows = await this.results.find({ _id: { $in: [...callIds] } }, { projection: { _id: 1 } }).toArray();
      return new Set(rows.map((r) => r._id));
    }
    const found = new Set<CallId>();
    for (let first = 0; first < callIds.length; first += ID_READS_IN_PARALLEL) {
      const rows = await Promise.all(
        callIds.slice(first, first + ID_READS_IN_PARALLEL).map((_id) => this.results.findOne({ _id }, { projection: { _id: 1 } })),
      );
      for (const row of rows) if (row) found.add(row._id);
    }
    return found;
  }

  callsOfTurn(runId: RunId, turn: number): Promise<CallRecord[]> {
    return this.calls.find({ run_id: runId, turn }, UNSLOTTED).toArray();
  }

  async resultsOfTurn(runId: RunId, turn: number): Promise<CallResultRecord[]> {
    return (await this.results.find({ run_id: runId, turn }, WITHOUT_CALL).toArray()).map(resultOf);
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
    turn: end.turn,
    ...(end.status === "stopped" ? { stop_reason: end.stop_reason } : {}),
    ...(end.responses ? { responses: end.responses } : {}),
    ...(end.usage ? { usage: end.usage } : {}),
    updated_at: new Date(),
  };
}

/**
 * Reads slots `from`..`to` in order, {@link SLOT_READS_IN_PARALLEL} at a time, until `full()`: each `read`
 * fetches one slot and returns what adds its rows, applied in slot order.
 */
async function forSlots(from: number, to: number, full: () => boolean, read: (slot: number) => Promise<() => void>): Promise<void> {
  for (let first = from; first <= to && !full(); first += SLOT_READS_IN_PARALLEL) {
    const slots = Array.from({ length: Math.min(SLOT_READS_IN_PARALLEL, to - first + 1) }, (_, i) => first + i);
    for (const add of await Promise.all(slots.map(read))) if (!full()) add();
  }
}

/** Drops an index an earlier release created; nothing to do where it does not exist (or the collection does not). */
async function dropIndexIfPresent<T extends Document>(collection: Collection<T>, name: string): Promise<void> {
  try {
    await collection.dropIndex(name);
  } catch (error) {
    // 26: no such collection, 27: no such index (MongoDB and FerretDB alike).
    const code = (error as { code?: unknown }).code;
    if (code !== 26 && code !== 27) throw error;
  }
}
