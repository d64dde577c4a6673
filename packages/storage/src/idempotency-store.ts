import type { ResultEnvelope, ToolRef } from "@toolgate/contracts";
import type { Collection, Db } from "mongodb";
import { InsertBatcher } from "./insert-batcher.js";

/** What a claim on an idempotency key found. */
export type ClaimOutcome =
  /** No record existed: this executor owns the key at `attempt` 1 and may run the tool. */
  | { kind: "claimed"; attempt: number }
  /** A previous owner's lease expired before it completed: this executor now owns `attempt`; the effect may or may not have happened. */
  | { kind: "taken_over"; attempt: number; previousOwner: string }
  /** The key completed earlier with the same arguments: replay the stored result. */
  | { kind: "replay"; result: ResultEnvelope; attempt: number }
  /** The key was used with different arguments. */
  | { kind: "conflict"; storedArgsHash: string }
  /** Another executor holds a live lease: try again after `retryAfterMs`. */
  | { kind: "busy"; retryAfterMs: number; owner: string };

export interface ClaimRequest {
  key: string;
  argsHash: string;
  owner: string;
  leaseMs: number;
  callId: string;
  runId: string;
  tool: ToolRef;
}

/**
 * The executor's record of side effects, one per idempotency key. Claims are inserts on a unique key (never
 * upserts), takeovers compare-and-set the attempt number, completion is fenced on owner and attempt.
 */
export interface IdempotencyStore {
  claim(request: ClaimRequest): Promise<ClaimOutcome>;
  /** Extends a live lease; false when this owner/attempt was fenced out. */
  renew(key: string, owner: string, attempt: number, leaseMs: number): Promise<boolean>;
  /** Stores the result; false when this owner/attempt was fenced out and must publish nothing. */
  complete(key: string, owner: string, attempt: number, result: ResultEnvelope): Promise<boolean>;
  /** Deletes completed records older than `before` (explicit retention: no TTL indexes). Returns the count. */
  purgeCompleted(before: Date): Promise<number>;
}

/** Stored shape of one key. */
export interface IdempotencyRecord {
  _id: string;
  args_hash: string;
  state: "in_flight" | "done";
  owner: string;
  attempt: number;
  lease_until: Date;
  call_id: string;
  run_id: string;
  tool: ToolRef;
  result?: ResultEnvelope;
  created_at: Date;
  completed_at?: Date;
}

const MAX_CLAIM_ROUNDS = 5;

/** {@link IdempotencyStore} on MongoDB with single-document operations only (works on FerretDB too). */
export class MongoIdempotencyStore implements IdempotencyStore {
  readonly #records: Collection<IdempotencyRecord>;
  readonly #inserts: InsertBatcher<IdempotencyRecord>;
  readonly #now: () => number;

  constructor(db: Db, options: { collection?: string; now?: () => number } = {}) {
    this.#records = db.collection<IdempotencyRecord>(options.collection ?? "idempotency_keys");
    this.#inserts = new InsertBatcher(this.#records);
    this.#now = options.now ?? Date.now;
  }

  async claim(request: ClaimRequest): Promise<ClaimOutcome> {
    const now = this.#now();
    const inserted = await this.#inserts.insert({
      _id: request.key,
      args_hash: request.argsHash,
      state: "in_flight",
      owner: request.owner,
      attempt: 1,
      lease_until: new Date(now + request.leaseMs),
      call_id: request.callId,
      run_id: request.runId,
      tool: request.tool,
      created_at: new Date(now),
    });
    if (inserted === "inserted") return { kind: "claimed", attempt: 1 };

    for (let round = 0; round < MAX_CLAIM_ROUNDS; round++) {
      const existing = await this.#records.findOne({ _id: request.key });
      // Deleted by retention between our insert and read: the key is free again.
      if (!existing) return this.claim(request);
      if (existing.args_hash !== request.argsHash) return { kind: "conflict", storedArgsHash: existing.args_hash };
      if (existing.state === "done" && existing.result) return { kind: "replay", result: existing.result, attempt: existing.attempt };
      const now = this.#now();
      const remaining = existing.lease_until.getTime() - now;
      if (remaining > 0) return { kind: "busy", retryAfterMs: remaining, owner: existing.owner };
      // The lease expired: take over only if nobody else did since we read (compare-and-set on attempt).
      const taken = await this.#records.findOneAndUpdate(
        { _id: request.key, state: "in_flight", attempt: existing.attempt },
        { $set: { owner: request.owner, lease_until: new Date(now + request.leaseMs), attempt: existing.attempt + 1 } },
        { returnDocument: "after" },
      );
      if (taken) return { kind: "taken_over", attempt: taken.attempt, previousOwner: existing.owner };
    }
    return { kind: "busy", retryAfterMs: request.leaseMs, owner: "unknown" };
  }

  async renew(key: string, owner: string, attempt: number, leaseMs: number): Promise<boolean> {
    const r = await this.#records.updateOne({ _id: key, state: "in_flight", owner, attempt }, { $set: { lease_until: new Date(this.#now() + leaseMs) } });
    return r.matchedCount === 1;
  }

  async complete(key: string, owner: string, attempt: number, result: ResultEnvelope): Promise<boolean> {
    const r = await this.#records.updateOne(
      { _id: key, state: "in_flight", owner, attempt },
      { $set: { state: "done", result, completed_at: new Date(this.#now()) } },
    );
    return r.matchedCount === 1;
  }

  async purgeCompleted(before: Date): Promise<number> {
    const r = await this.#records.deleteMany({ state: "done", completed_at: { $lt: before } });
    return r.deletedCount;
  }
}
