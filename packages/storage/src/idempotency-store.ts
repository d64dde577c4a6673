import { randomBytes } from "node:crypto";
import type { ResultEnvelope, ToolRef } from "@toolgate/contracts";
import type { Collection, Db } from "mongodb";
import { InsertBatcher } from "./insert-batcher.js";

/** What a claim on an idempotency key found. */
export type ClaimOutcome =
  /**
   * This executor owns `attempt` and may run the tool: attempt 1 of a new key, or the attempt that follows a
   * retryable failure (which had no effect). `firstClaimAt` is when attempt 1 was claimed (epoch ms).
   */
  | { kind: "claimed"; attempt: number; firstClaimAt: number; retried?: RetriedAttempt[] }
  /**
   * A previous owner's lease expired before it completed: this executor now owns `attempt`; the effect may or
   * may not have happened. `abandoned` counts the attempts of this key that ended that way, this one included.
   */
  | { kind: "taken_over"; attempt: number; previousOwner: string; abandoned: number; firstClaimAt: number; retried?: RetriedAttempt[] }
  /** The key completed earlier with the same arguments: replay the stored result. */
  | { kind: "replay"; result: ResultEnvelope; attempt: number }
  /** The key was used with different arguments. */
  | { kind: "conflict"; storedArgsHash: string }
  /** Another executor holds a live lease, or the next attempt may not start yet: try again after `retryAfterMs`. */
  | { kind: "busy"; retryAfterMs: number; owner: string };

/**
 * An earlier attempt of the key that ended in a retryable failure without effect (a `retry` step), as the store
 * recorded it: what its `retry_scheduled` event says. Handed to the owner of a later attempt (present only when
 * there was one), which publishes those events again before its own: an attempt whose own publish was lost (the
 * stream had no leader, say) still leaves its trace. `at` is when the next attempt's not-before was fixed.
 */
export interface RetriedAttempt {
  attempt: number;
  code: string;
  at: number;
  notBefore: number;
}

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
  /**
   * Claims a new key and completes its attempt 1 with `result` in one write: for a tool without side effects that
   * ran before its key was claimed. False when the key exists (claim it to learn why) and nothing was written.
   */
  claimDone(request: ClaimRequest, result: ResultEnvelope): Promise<boolean>;
  /**
   * Ends `attempt` with a retryable failure that had no effect: attempt + 1 may be claimed from `notBefore` on
   * (by any executor). False when this owner/attempt was fenced out and must neither retry nor publish.
   */
  scheduleRetry(key: string, owner: string, attempt: number, result: ResultEnvelope, notBefore: Date): Promise<boolean>;
  /** Deletes completed records older than `before` (explicit retention: no TTL indexes). Returns the count. */
  purgeCompleted(before: Date): Promise<number>;
}

/** Stored shape of one key: its arguments and attempt 1, written once by the claim that inserted it. */
export interface IdempotencyRecord {
  _id: string;
  /** Random id of this use of the key: a key purged and claimed again starts a new generation of steps. */
  gen: string;
  args_hash: string;
  /** Owner of attempt 1. */
  owner: string;
  /** Lease of attempt 1; only that owner renews it. */
  lease_until: Date;
  call_id: string;
  run_id: string;
  tool: ToolRef;
  created_at: Date;
  /**
   * Attempt 1's result as JSON text, when the key was claimed already done ({@link IdempotencyStore.claimDone}):
   * no step of its generation ever follows.
   */
  result_json?: string;
}

/**
 * Step `n` (from 2) of a key's generation: attempt `n` starts (a takeover), attempt `n - 1` completed (done),
 * or attempt `n - 1` failed retryably and attempt `n` may start later (retry). All claim the same unique `_id`,
 * so exactly one of them happens: this insert is the compare-and-set, and a document is never updated by
 * anyone but the owner of its attempt. After a retry step, attempt `n` starts with the unique insert of
 * `<gen>:<n>:start` (kind `start`), the compare-and-set among the executors that want to run it.
 */
export interface IdempotencyStep {
  /** `<gen>:<n>`, or `<gen>:<n>:start` */
  _id: string;
  key: string;
  gen: string;
  n: number;
  kind: "takeover" | "done" | "retry" | "start";
  /** The attempt that starts (`takeover`, `start`: = n) or that ended (`done`, `retry`: = n - 1). */
  attempt: number;
  owner: string;
  /** Lease of the attempt that starts (`takeover`, `start`); only its owner renews it. */
  lease_until?: Date;
  /** `retry`: attempt `n` may not start before this. */
  not_before?: Date;
  /**
   * The result envelope as JSON text: tool data is untrusted and may hold keys such as "$ref" or "a.b",
   * which a document field cannot (FerretDB refuses them, MongoDB restricts them).
   */
  result_json?: string;
  at: Date;
}

type KeyState =
  | { kind: "in_flight"; attempt: number; owner: string; leaseUntil: number; abandoned: number; retried: RetriedAttempt[] }
  | { kind: "retry_wait"; attempt: number; owner: string; notBefore: number; abandoned: number; retried: RetriedAttempt[] }
  | { kind: "done"; attempt: number; result: ResultEnvelope };

/** Which document holds an attempt's owner and lease: the key (attempt 1), its takeover step, or its start step. */
type LeaseDoc = "key" | "step" | "start";

/** An attempt this instance owns, and since when (its clock). */
interface Ownership {
  gen: string;
  owner: string;
  attempt: number;
  since: number;
  doc: LeaseDoc;
}

const MAX_CLAIM_ROUNDS = 5;
const MAX_STEPS = 10_000;
const MAX_CACHED_OWNERSHIPS = 10_000;

/** The error code of a retry step's stored failure (what its `retry_scheduled` named). */
function retryCode(resultJson: string | undefined): string {
  try {
    const result = JSON.parse(resultJson ?? "null") as { error?: { code?: unknown } } | null;
    return typeof result?.error?.code === "string" ? result.error.code : "EXECUTION_ERROR";
  } catch {
    return "EXECUTION_ERROR";
  }
}

function stepId(gen: string, n: number): string {
  return `${gen}:${n}`;
}

function startId(gen: string, n: number): string {
  return `${gen}:${n}:start`;
}

/**
 * {@link IdempotencyStore} on MongoDB using inserts on unique keys as its only atomic operation, so it holds
 * on FerretDB too, whose conditional updates are a read then a whole-document write (two executors could both
 * "win" a compare-and-set there). Each document has a single writer after its insert.
 */
export class MongoIdempotencyStore implements IdempotencyStore {
  readonly #keys: Collection<IdempotencyRecord>;
  readonly #steps: Collection<IdempotencyStep>;
  readonly #inserts: InsertBatcher<IdempotencyRecord>;
  readonly #stepInserts: InsertBatcher<IdempotencyStep>;
  readonly #now: () => number;
  readonly #minRetentionMs: number;
  /** Attempts this instance owns, so `complete` need not read them back; ownership never changes hands. */
  readonly #owned = new Map<string, Ownership>();

  /**
   * `minRetentionMs`: completed keys younger than this are never purged, so an attempt that completes within
   * it cannot have had its key purged meanwhile and needs no check for that.
   */
  constructor(db: Db, options: { collection?: string; now?: () => number; minRetentionMs?: number } = {}) {
    const name = options.collection ?? "idempotency_keys";
    this.#keys = db.collection<IdempotencyRecord>(name);
    this.#steps = db.collection<IdempotencyStep>(`${name}_steps`);
    this.#inserts = new InsertBatcher(this.#keys);
    this.#stepInserts = new InsertBatcher(this.#steps);
    this.#now = options.now ?? Date.now;
    this.#minRetentionMs = options.minRetentionMs ?? 3_600_000;
  }

  async claim(request: ClaimRequest): Promise<ClaimOutcome> {
    let insert = true;
    for (let round = 0; round < MAX_CLAIM_ROUNDS; round++) {
      const now = this.#now();
      if (insert) {
        const gen = randomBytes(12).toString("hex");
        const inserted = await this.#inserts.insert({
          _id: request.key,
          gen,
          args_hash: request.argsHash,
          owner: request.owner,
          lease_until: new Date(now + request.leaseMs),
          call_id: request.callId,
          run_id: request.runId,
          tool: request.tool,
          created_at: new Date(now),
        });
        if (inserted === "inserted") {
          this.#remember(request.key, { gen, owner: request.owner, attempt: 1, since: now, doc: "key" });
          return { kind: "claimed", attempt: 1, firstClaimAt: now };
        }
      }
      const key = await this.#keys.findOne({ _id: request.key });
      // Purged by retention between our insert and read: the key is free again.
      insert = !key;
      if (!key) continue;
      if (key.args_hash !== request.argsHash) return { kind: "conflict", storedArgsHash: key.args_hash };
      const state = await this.#state(key);
      if (state.kind === "done") return { kind: "replay", result: state.result, attempt: state.attempt };
      const firstClaimAt = key.created_at.getTime();
      if (state.kind === "retry_wait") {
        const wait = state.notBefore - now;
        if (wait > 0) return { kind: "busy", retryAfterMs: wait, owner: state.owner };
        // The failed attempt had no effect: whoever inserts the start of the next one runs it.
        const started = await this.#insertStep({
          _id: startId(key.gen, state.attempt),
          key: request.key,
          gen: key.gen,
          n: state.attempt,
          kind: "start",
          attempt: state.attempt,
          owner: request.owner,
          lease_until: new Date(now + request.leaseMs),
          at: new Date(now),
        });
        if (started) {
          this.#remember(request.key, { gen: key.gen, owner: request.owner, attempt: state.attempt, since: now, doc: "start" });
          return { kind: "claimed", attempt: state.attempt, firstClaimAt, retried: state.retried };
        }
        continue;
      }
      const remaining = state.leaseUntil - now;
      if (remaining > 0) return { kind: "busy", retryAfterMs: remaining, owner: state.owner };
      // The lease expired: the next step is ours unless another executor took over, or the owner completed, first.
      const attempt = state.attempt + 1;
      const took = await this.#insertStep({
        _id: stepId(key.gen, attempt),
        key: request.key,
        gen: key.gen,
        n: attempt,
        kind: "takeover",
        attempt,
        owner: request.owner,
        lease_until: new Date(now + request.leaseMs),
        at: new Date(now),
      });
      if (took) {
        this.#remember(request.key, { gen: key.gen, owner: request.owner, attempt, since: now, doc: "step" });
        return {
          kind: "taken_over",
          attempt,
          previousOwner: state.owner,
          abandoned: state.abandoned + 1,
          firstClaimAt,
          ...(state.retried.length > 0 ? { retried: state.retried } : {}),
        };
      }
    }
    return { kind: "busy", retryAfterMs: request.leaseMs, owner: "unknown" };
  }

  async renew(key: string, owner: string, attempt: number, leaseMs: number): Promise<boolean> {
    const owned = await this.#ownedAttempt(key, owner, attempt);
    if (owned === undefined || (await this.#superseded(owned.gen, attempt))) return false;
    const leaseUntil = new Date(this.#now() + leaseMs);
    // Only the attempt's owner writes its lease, so this plain update has no competing writer.
    const r =
      owned.doc === "key"
        ? await this.#keys.updateOne({ _id: key, gen: owned.gen, owner }, { $set: { lease_until: leaseUntil } })
        : await this.#steps.updateOne(
            { _id: owned.doc === "step" ? stepId(owned.gen, attempt) : startId(owned.gen, attempt), owner },
            { $set: { lease_until: leaseUntil } },
          );
    // A takeover that landed meanwhile makes the renewed lease worthless.
    return r.matchedCount === 1 && !(await this.#superseded(owned.gen, attempt));
  }

  async complete(key: string, owner: string, attempt: number, result: ResultEnvelope): Promise<boolean> {
    return this.#end(key, owner, attempt, result, "done");
  }

  async claimDone(request: ClaimRequest, result: ResultEnvelope): Promise<boolean> {
    const now = new Date(this.#now());
    const inserted = await this.#inserts.insert({
      _id: request.key,
      gen: randomBytes(12).toString("hex"),
      args_hash: request.argsHash,
      owner: request.owner,
      // Nothing runs under this record: its lease is over as it is written.
      lease_until: now,
      call_id: request.callId,
      run_id: request.runId,
      tool: request.tool,
      created_at: now,
      result_json: JSON.stringify(result),
    });
    return inserted === "inserted";
  }

  async scheduleRetry(key: string, owner: string, attempt: number, result: ResultEnvelope, notBefore: Date): Promise<boolean> {
    return this.#end(key, owner, attempt, result, "retry", notBefore);
  }

  /** Inserts the step that ends `attempt` (the compare-and-set against a takeover of it). */
  async #end(key: string, owner: string, attempt: number, result: ResultEnvelope, kind: "done" | "retry", notBefore?: Date): Promise<boolean> {
    const cached = this.#owned.get(key);
    const owned = await this.#ownedAttempt(key, owner, attempt);
    if (owned === undefined) return false;
    const now = this.#now();
    const recent = cached !== undefined && cached.gen === owned.gen && now - cached.since < this.#minRetentionMs;
    const stored = await this.#insertStep({
      _id: stepId(owned.gen, attempt + 1),
      key,
      gen: owned.gen,
      n: attempt + 1,
      kind,
      attempt,
      owner,
      result_json: JSON.stringify(result),
      ...(notBefore ? { not_before: notBefore } : {}),
      at: new Date(now),
    });
    this.#owned.delete(key);
    if (!stored) return false;
    // A zombie paused past retention could insert into a purged generation: it must find its key gone.
    return recent || (await this.#keys.countDocuments({ _id: key, gen: owned.gen }, { limit: 1 })) > 0;
  }

  async purgeCompleted(before: Date): Promise<number> {
    if (before.getTime() > this.#now() - this.#minRetentionMs) throw new RangeError(`completed keys are kept at least ${this.#minRetentionMs} ms`);
    const done = await this.#steps.find({ kind: "done", at: { $lt: before } }, { projection: { key: 1, gen: 1 } }).toArray();
    let purged = 0;
    // Keys claimed already done have no steps.
    const claimedDone = await this.#keys.find({ result_json: { $exists: true }, created_at: { $lt: before } }, { projection: { gen: 1 } }).toArray();
    for (const key of claimedDone) purged += (await this.#keys.deleteOne({ _id: key._id, gen: key.gen })).deletedCount;
    for (const step of done) {
      // The key first: a claim after this starts a new generation and never sees the old steps.
      purged += (await this.#keys.deleteOne({ _id: step.key, gen: step.gen })).deletedCount;
      await this.#steps.deleteMany({ gen: step.gen });
    }
    return purged;
  }

  /** Where the key stands: the last step of its generation decides. */
  async #state(key: IdempotencyRecord): Promise<KeyState> {
    if (key.result_json !== undefined) return { kind: "done", attempt: 1, result: JSON.parse(key.result_json) as ResultEnvelope };
    let abandoned = 0;
    const retried: RetriedAttempt[] = [];
    let state: KeyState = { kind: "in_flight", attempt: 1, owner: key.owner, leaseUntil: key.lease_until.getTime(), abandoned, retried };
    for (let n = 2; n < MAX_STEPS; n++) {
      const step = await this.#steps.findOne({ _id: stepId(key.gen, n) });
      if (!step) return state;
      switch (step.kind) {
        case "done":
          return { kind: "done", attempt: step.attempt, result: JSON.parse(step.result_json ?? "null") as ResultEnvelope };
        case "takeover":
          abandoned += 1;
          state = { kind: "in_flight", attempt: n, owner: step.owner, leaseUntil: step.lease_until?.getTime() ?? 0, abandoned, retried };
          break;
        case "retry": {
          const notBefore = step.not_before?.getTime() ?? 0;
          retried.push({ attempt: step.attempt, code: retryCode(step.result_json), at: step.at.getTime(), notBefore });
          const start = await this.#steps.findOne({ _id: startId(key.gen, n) });
          state = start
            ? { kind: "in_flight", attempt: n, owner: start.owner, leaseUntil: start.lease_until?.getTime() ?? 0, abandoned, retried }
            : { kind: "retry_wait", attempt: n, owner: step.owner, notBefore, abandoned, retried };
          break;
        }
        case "start":
          // Never stored under a plain step id.
          return state;
      }
    }
    return state;
  }

  /** The generation of `key`, and where the lease lives, when `owner` holds (or held) `attempt` of it. */
  async #ownedAttempt(key: string, owner: string, attempt: number): Promise<{ gen: string; doc: LeaseDoc } | undefined> {
    const cached = this.#owned.get(key);
    if (cached && cached.owner === owner && cached.attempt === attempt) return { gen: cached.gen, doc: cached.doc };
    const record = await this.#keys.findOne({ _id: key });
    if (!record) return undefined;
    if (attempt === 1) return record.owner === owner ? { gen: record.gen, doc: "key" } : undefined;
    const step = await this.#steps.findOne({ _id: stepId(record.gen, attempt) });
    if (step?.kind === "takeover") return step.owner === owner ? { gen: record.gen, doc: "step" } : undefined;
    if (step?.kind !== "retry") return undefined;
    const start = await this.#steps.findOne({ _id: startId(record.gen, attempt) });
    return start?.owner === owner ? { gen: record.gen, doc: "start" } : undefined;
  }

  async #superseded(gen: string, attempt: number): Promise<boolean> {
    return (await this.#steps.countDocuments({ _id: stepId(gen, attempt + 1) }, { limit: 1 })) > 0;
  }

  /** Inserts a step; false when that step already exists (someone else's takeover or completion won). */
  async #insertStep(step: IdempotencyStep): Promise<boolean> {
    return (await this.#stepInserts.insert(step)) === "inserted";
  }

  #remember(key: string, ownership: Ownership): void {
    this.#owned.delete(key);
    this.#owned.set(key, ownership);
    if (this.#owned.size > MAX_CACHED_OWNERSHIPS) {
      const oldest = this.#owned.keys().next().value;
      if (oldest !== undefined) this.#owned.delete(oldest);
    }
  }
}
