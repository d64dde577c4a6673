import { randomBytes } from "node:crypto";
import type { Collection, Db } from "mongodb";
import { DUPLICATE_KEY, InsertBatcher } from "./insert-batcher.js";

/**
 * Where one use of a client's idempotency key stands: `claimed` (the owner is creating the work, nothing known
 * yet), `submitted` (the work exists: its run and call ids are known), `done` (the response is stored), `failed`
 * (the owner gave up on an error that left nothing to replay: the next request with the key takes it over).
 */
export type RequestKeyState = "claimed" | "submitted" | "done" | "failed";

/** One client idempotency key in one scope (an authenticated principal). */
export interface RequestKeyRecord {
  /** Unique with (scope, key) as well: the id is derived from them. */
  _id: string;
  scope: string;
  key: string;
  /** The request this key was first used for: method, route and a hash of the canonical body. */
  route: string;
  fingerprint: string;
  state: RequestKeyState;
  /** Random id of the current owner's claim; only the holder of `gen` writes the record. */
  gen: string;
  owner: string;
  /** A `claimed` record whose lease passed is taken over (its owner died or gave up). */
  lease_until: Date;
  /** The run the work belongs to, fixed at the claim so that a takeover re-submits into the same run. */
  run_id?: string;
  /** The runtime call ids of the work, in request order, once known. */
  call_ids?: string[];
  /** The stored response (status and JSON body), for work replayed as it was answered. */
  response?: { status: number; body_json: string };
  created_at: Date;
  /** Purged after this (retention); a key used again after its purge starts afresh. */
  expires_at: Date;
}

/** What claiming a key found: this request owns it now, or another use of it exists (returned as stored). */
export type RequestKeyClaim = { kind: "claimed"; record: RequestKeyRecord } | { kind: "existing"; record: RequestKeyRecord };

export interface RequestKeyClaimRequest {
  scope: string;
  key: string;
  route: string;
  fingerprint: string;
  owner: string;
  leaseMs: number;
  retentionMs: number;
  runId?: string;
}

/**
 * Durable host idempotency keys (the IETF Idempotency-Key header): insert-first-wins claims per (scope, key), so
 * that two concurrent requests with one key create one piece of work. A stale claim is taken over by a unique
 * insert on `<id>:<gen>` (FerretDB's conditional update is a read and a write, not a compare-and-set).
 */
export interface RequestIdempotencyStore {
  /** Claims `key` in `scope`, or returns the record another request stored. Throws when the store is unreachable. */
  claim(request: RequestKeyClaimRequest): Promise<RequestKeyClaim>;
  /** Takes a stale or failed record over for `owner`: the new record, or undefined when another request won. */
  takeOver(record: RequestKeyRecord, owner: string, leaseMs: number): Promise<RequestKeyRecord | undefined>;
  /** Extends a claim's lease to `leaseUntil` while its owner is still creating the work (the owner of `gen` only). */
  renew(record: RequestKeyRecord, leaseUntil: Date): Promise<void>;
  /** Records the work's ids (the owner of `gen` only). */
  submitted(record: RequestKeyRecord, ids: { runId: string; callIds: string[] }): Promise<void>;
  /** Stores the response (the owner of `gen` only). */
  complete(record: RequestKeyRecord, response: { status: number; body: unknown }, ids?: { runId: string; callIds: string[] }): Promise<void>;
  /** Marks the claim failed: the next request with this key takes it over (the owner of `gen` only). */
  fail(record: RequestKeyRecord): Promise<void>;
  /** Deletes the keys whose retention ended before `now` (FerretDB has no TTL index; indexed on MongoDB, a scan on FerretDB). */
  purgeExpired(now: Date): Promise<number>;
}

/** The ids a claim's work got, by claim generation: `submitted` as an insert (see `submitted`). */
interface SubmissionRecord {
  /** `<record id>:<gen>` */
  _id: string;
  run_id: string;
  call_ids: string[];
  expires_at: Date;
}

/** Stale claims already taken over, by the generation that was superseded. */
interface TakeoverRecord {
  /** `<record id>:<superseded gen>` */
  _id: string;
  record_id: string;
  owner: string;
  expires_at: Date;
}

const newGen = (): string => randomBytes(9).toString("base64url");

/**
 * {@link RequestIdempotencyStore} on MongoDB or FerretDB: collections `name`, `<name>_submissions` and
 * `<name>_takeovers`.
 *
 * Every submission is on the hot path of a keyed request, so its write is an insert that batches with the
 * others in flight (`<name>_submissions`, by claim generation), not an update of the key's record: an update
 * is one round trip per request, and on FerretDB a read and a whole-document write. A record read back is the
 * record with its generation's submission applied, so readers see `submitted` as before.
 */
export class MongoRequestIdempotencyStore implements RequestIdempotencyStore {
  readonly records: Collection<RequestKeyRecord>;
  readonly #submissions: Collection<SubmissionRecord>;
  readonly #takeovers: Collection<TakeoverRecord>;
  readonly #claims: InsertBatcher<RequestKeyRecord>;
  readonly #submitted: InsertBatcher<SubmissionRecord>;

  constructor(db: Db, name = "host_idempotency") {
    this.records = db.collection<RequestKeyRecord>(name);
    this.#submissions = db.collection<SubmissionRecord>(`${name}_submissions`);
    this.#takeovers = db.collection<TakeoverRecord>(`${name}_takeovers`);
    this.#claims = new InsertBatcher(this.records);
    this.#submitted = new InsertBatcher(this.#submissions);
  }

  /** The unique (scope, key) index and the expiry indexes the purge walks. */
  async ensureIndexes(): Promise<void> {
    await this.records.createIndex({ scope: 1, key: 1 }, { unique: true });
    await this.records.createIndex({ expires_at: 1 });
    await this.#submissions.createIndex({ expires_at: 1 });
    await this.#takeovers.createIndex({ expires_at: 1 });
  }

  /** The record stored under `id`, with its current generation's submission applied (null when there is none). */
  async #read(id: string): Promise<RequestKeyRecord | null> {
    const record = await this.records.findOne({ _id: id });
    if (record?.state !== "claimed") return record;
    const submission = await this.#submissions.findOne({ _id: `${id}:${record.gen}` });
    return submission ? { ...record, state: "submitted", run_id: submission.run_id, call_ids: submission.call_ids } : record;
  }

  async claim(request: RequestKeyClaimRequest): Promise<RequestKeyClaim> {
    const now = new Date();
    const record: RequestKeyRecord = {
      _id: recordId(request.scope, request.key),
      scope: request.scope,
      key: request.key,
      route: request.route,
      fingerprint: request.fingerprint,
      state: "claimed",
      gen: newGen(),
      owner: request.owner,
      lease_until: new Date(now.getTime() + request.leaseMs),
      ...(request.runId === undefined ? {} : { run_id: request.runId }),
      created_at: now,
      expires_at: new Date(now.getTime() + request.retentionMs),
    };
    // Batched with the claims made at the same moment: after an outage every client's retry claims at once.
    if ((await this.#claims.insert(record)) === "inserted") return { kind: "claimed", record };
    // By `_id`, not by (scope, key): the id is the pair, and FerretDB serves only `_id` lookups from an index
    // (a retry storm after an outage reads every key once per retry otherwise).
    const existing = await this.#read(record._id);
    // Purged between the insert and the read: claim again (a purge only removes expired keys).
    if (!existing) return this.claim(request);
    return { kind: "existing", record: existing };
  }

  async takeOver(record: RequestKeyRecord, owner: string, leaseMs: number): Promise<RequestKeyRecord | undefined> {
    try {
      await this.#takeovers.insertOne({ _id: `${record._id}:${record.gen}`, record_id: record._id, owner, expires_at: record.expires_at });
    } catch (error) {
      if ((error as { code?: unknown }).code === DUPLICATE_KEY) return undefined;
      throw error;
    }
    const next: RequestKeyRecord = { ...record, state: "claimed", gen: newGen(), owner, lease_until: new Date(Date.now() + leaseMs) };
    // Only the winner of the insert above writes: no two writers race on this update.
    await this.records.updateOne({ _id: record._id }, { $set: { state: next.state, gen: next.gen, owner, lease_until: next.lease_until } });
    return next;
  }

  async renew(record: RequestKeyRecord, leaseUntil: Date): Promise<void> {
    await this.records.updateOne({ _id: record._id, gen: record.gen, state: "claimed" }, { $set: { lease_until: leaseUntil } });
  }

  async submitted(record: RequestKeyRecord, ids: { runId: string; callIds: string[] }): Promise<void> {
    // Keyed by generation: a claim taken over from this one records its own submission, never this one's. A
    // duplicate is this generation's submission already recorded: one generation submits its work once.
    await this.#submitted.insert({ _id: `${record._id}:${record.gen}`, run_id: ids.runId, call_ids: ids.callIds, expires_at: record.expires_at });
  }

  async complete(record: RequestKeyRecord, response: { status: number; body: unknown }, ids?: { runId: string; callIds: string[] }): Promise<void> {
    await this.records.updateOne(
      { _id: record._id, gen: record.gen },
      {
        $set: {
          state: "done",
          response: { status: response.status, body_json: JSON.stringify(response.body) },
          ...(ids ? { run_id: ids.runId, call_ids: ids.callIds } : {}),
        },
      },
    );
  }

  async fail(record: RequestKeyRecord): Promise<void> {
    await this.records.updateOne({ _id: record._id, gen: record.gen, state: "claimed" }, { $set: { state: "failed" } });
  }

  async purgeExpired(now: Date): Promise<number> {
    const [purged] = await Promise.all([
      this.records.deleteMany({ expires_at: { $lt: now } }),
      this.#submissions.deleteMany({ expires_at: { $lt: now } }),
      this.#takeovers.deleteMany({ expires_at: { $lt: now } }),
    ]);
    return purged.deletedCount;
  }
}

/** Length-prefixed, so that no (scope, key) pair spells another's id. */
function recordId(scope: string, key: string): string {
  return `${scope.length}:${scope}:${key}`;
}
