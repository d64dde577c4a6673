import type { Principal, ResultEnvelope, RunContext, ToolRef } from "@toolgate/contracts";
import { InsertBatcher } from "@toolgate/storage";
import type { Collection, Db } from "mongodb";

/** The states of an operation: accepted → running → succeeded | failed | cancelled. */
export type OperationState = "accepted" | "running" | "succeeded" | "failed" | "cancelled";

/** What a reconciliation found out. */
export type ReconciledOutcome = "applied" | "not_applied" | "still_unknown";

/** Position of a state in the lifecycle: the step id suffix, and the attempt of its `operation_updated` event. */
export function stateRank(state: OperationState): 1 | 2 | 3 {
  return state === "accepted" ? 1 : state === "running" ? 2 : 3;
}

export function isFinished(state: OperationState): boolean {
  return stateRank(state) === 3;
}

/**
 * Work that goes on after its call's terminal event: a long-running tool's job (followed through its status
 * check, cancellable through its cancel tool) or the reconciliation of an unknown outcome. Written once.
 */
export interface OperationRecord {
  /** `op_<ULID of the call>_<attempt>`: the runtime's id; the tool's own id stays internal. */
  _id: string;
  kind: "job" | "reconciliation";
  call_id: string;
  run_id: string;
  /** Whose call started it: only this tenant and subject may read or cancel it. */
  principal: Principal;
  /** The call's trusted run context, passed on to status and cancel tools. */
  context: RunContext;
  tool: ToolRef;
  args_hash?: string;
  /** Sequence of the call's terminal event: the operation's events follow it. */
  seq: number;
  attempt: number;
  idempotency_key: string;
  /** job: the tool's own operation id. */
  tool_operation_id?: string;
  /** reconciliation: why the outcome is unknown. */
  cause?: "timeout" | "abandoned" | "connection_lost" | "interrupted";
  created_at: Date;
  /** No status check before this. */
  not_before: Date;
  /** Unfinished after this: cancelled (a job) or given up as still unknown (a reconciliation). */
  deadline: Date;
}

/** State `running` (rank 2) or the final state (rank 3), each inserted once: the insert is the compare-and-set. */
interface OperationStep {
  /** `<operation id>:<rank>` */
  _id: string;
  op_id: string;
  state: OperationState;
  result_json?: string;
  reconciled?: ReconciledOutcome;
  at: Date;
}

/** An operation and where it stands. */
export interface OperationView {
  record: OperationRecord;
  state: OperationState;
  result?: ResultEnvelope;
  reconciled?: ReconciledOutcome;
  updatedAt: Date;
}

/**
 * The executor's operations in MongoDB with inserts and `_id` lookups only (FerretDB-safe): the record is
 * inserted once, and each later state is a unique insert of `<id>:<rank>`, so of two executors finishing one
 * operation differently (succeeded vs cancelled) exactly one wins.
 */
export class MongoOperationStore {
  readonly #records: Collection<OperationRecord>;
  readonly #steps: Collection<OperationStep>;
  readonly #recordInserts: InsertBatcher<OperationRecord>;
  readonly #stepInserts: InsertBatcher<OperationStep>;

  constructor(db: Db, collection = "operations") {
    this.#records = db.collection<OperationRecord>(collection);
    this.#steps = db.collection<OperationStep>(`${collection}_steps`);
    this.#recordInserts = new InsertBatcher(this.#records);
    this.#stepInserts = new InsertBatcher(this.#steps);
  }

  /** Stores a new operation; a second create of the same id (a redelivery) leaves the first in place. */
  async create(record: OperationRecord): Promise<void> {
    await this.#recordInserts.insert(record);
  }

  /** The operation and its current state, or undefined when there is no such operation. */
  async get(id: string): Promise<OperationView | undefined> {
    const record = await this.#records.findOne({ _id: id });
    if (!record) return undefined;
    const step = (await this.#steps.findOne({ _id: `${id}:3` })) ?? (await this.#steps.findOne({ _id: `${id}:2` }));
    if (!step) return { record, state: "accepted", updatedAt: record.created_at };
    return {
      record,
      state: step.state,
      ...(step.result_json === undefined ? {} : { result: JSON.parse(step.result_json) as ResultEnvelope }),
      ...(step.reconciled === undefined ? {} : { reconciled: step.reconciled }),
      updatedAt: step.at,
    };
  }

  /** Moves the operation to `state`; false when that step was taken already (by this or another executor). */
  async advance(id: string, state: Exclude<OperationState, "accepted">, result?: ResultEnvelope, reconciled?: ReconciledOutcome): Promise<boolean> {
    const outcome = await this.#stepInserts.insert({
      _id: `${id}:${stateRank(state)}`,
      op_id: id,
      state,
      ...(result === undefined ? {} : { result_json: JSON.stringify(result) }),
      ...(reconciled === undefined ? {} : { reconciled }),
      at: new Date(),
    });
    return outcome === "inserted";
  }

  /** Deletes operations that finished before `before` (explicit retention: no TTL indexes). Returns the count. */
  async purgeFinished(before: Date): Promise<number> {
    const finished = await this.#steps.find({ _id: { $regex: ":3$" }, at: { $lt: before } }, { projection: { op_id: 1 } }).toArray();
    let purged = 0;
    for (const step of finished) {
      // The record first: an operation without its record is invisible, one without its steps looks unfinished.
      purged += (await this.#records.deleteOne({ _id: step.op_id })).deletedCount;
      await this.#steps.deleteMany({ op_id: step.op_id });
    }
    return purged;
  }
}
