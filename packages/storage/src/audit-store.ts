import { createHash } from "node:crypto";
import { canonicalJson, sha256, type EventRejection, type ToolgateEvent } from "@toolgate/contracts";
import { MongoBulkWriteError, type Collection, type Db } from "mongodb";
import { DUPLICATE_KEY, writeErrorsOf } from "./insert-batcher.js";

/** One stored event, linked to the previous event of the same call (or run) by hash. */
export interface AuditRecord {
  /** The event id: storing an event twice is impossible. */
  _id: string;
  /** The call id for call events, the run id for run events. */
  chain_id: string;
  /** 1-based position in the chain: the order in which audit stored the chain's events. */
  idx: number;
  prev_hash: string | null;
  /** sha256 over prev_hash, chain id, idx and the stored (redacted) event. */
  hash: string;
  run_id: string;
  call_id?: string;
  kind: ToolgateEvent["kind"];
  type: string;
  stream_seq: number;
  stored_at: Date;
  event: ToolgateEvent;
}

/**
 * How a record is kept: the event as its RFC 8785 text, exactly what the hash covers. Events carry untrusted
 * data (tool results, arguments) whose keys may start with "$" or contain ".", which a document field cannot.
 */
type StoredAuditRecord = Omit<AuditRecord, "event"> & { event_json: string };

/** A bus message that was not a valid event, kept so nothing is lost silently. */
export interface RejectedMessage {
  _id: string;
  subject: string;
  stream_seq: number;
  reason: EventRejection["reason"];
  detail: string;
  bytes: number;
  sha256: string;
  /** The first 2 KiB, base64: enough to diagnose; the full message stays in the stream at `stream_seq`. */
  preview: string;
  received_at: Date;
}

/** Result of re-computing a chain. */
export type ChainVerification = { ok: true; length: number; head: string | null } | { ok: false; length: number; brokenAt: number; problem: string };

/** The append-only audit log. */
export interface AuditStore {
  /** Stores `event` once; a redelivered event returns "duplicate". Appends are linked per chain in arrival order. */
  append(event: ToolgateEvent, streamSeq: number): Promise<"stored" | "duplicate">;
  /** Every event of one call (or the run's own events), in chain order. */
  chain(chainId: string): Promise<AuditRecord[]>;
  /** Every event of a run, calls included, in stream order. */
  run(runId: string): Promise<AuditRecord[]>;
  /** Re-computes every hash and link of a chain. */
  verify(chainId: string): Promise<ChainVerification>;
  recordRejected(rejection: EventRejection, message: { subject: string; streamSeq: number; data: Uint8Array }): Promise<void>;
}

interface Head {
  idx: number;
  hash: string;
}

interface Pending {
  event: ToolgateEvent;
  streamSeq: number;
  retries: number;
  resolve: (outcome: "stored" | "duplicate") => void;
  reject: (error: unknown) => void;
}

const MAX_BATCH = 256;
const MAX_CACHED_HEADS = 100_000;
const MAX_RETRIES = 8;

/** Hash of one record: binds the event to its place in its chain. */
export function recordHash(prevHash: string | null, chainId: string, idx: number, event: ToolgateEvent): string {
  return hashOfText(prevHash, chainId, idx, canonicalJson(event));
}

function hashOfText(prevHash: string | null, chainId: string, idx: number, eventJson: string): string {
  return sha256(`${prevHash ?? ""}\n${chainId}\n${idx}\n${eventJson}`);
}

function decoded({ event_json, ...record }: StoredAuditRecord): AuditRecord {
  return { ...record, event: JSON.parse(event_json) as ToolgateEvent };
}

function chainOf(event: ToolgateEvent): string {
  return event.kind === "call" ? event.call_id : event.run_id;
}

function startsChain(event: ToolgateEvent): boolean {
  return (event.kind === "call" && event.type === "proposed") || (event.kind === "run" && event.type === "started");
}

/**
 * {@link AuditStore} on MongoDB. Appends are serialized in this process and written in ordered batches, so
 * per-chain order is arrival order; a unique index on (chain_id, idx) keeps chains linear across replicas,
 * and the event id as `_id` makes storage exactly-once under at-least-once delivery.
 */
export class MongoAuditStore implements AuditStore {
  readonly #records: Collection<StoredAuditRecord>;
  readonly #rejected: Collection<RejectedMessage>;
  readonly #heads = new Map<string, Head>();
  #queue: Pending[] = [];
  #flushing = false;

  constructor(db: Db, options: { collection?: string } = {}) {
    const name = options.collection ?? "audit_events";
    this.#records = db.collection<StoredAuditRecord>(name);
    this.#rejected = db.collection<RejectedMessage>(`${name}_rejected`);
  }

  /** Creates the indexes the log relies on; idempotent. */
  async ensureIndexes(): Promise<void> {
    await this.#records.createIndex({ chain_id: 1, idx: 1 }, { unique: true, name: "chain_position" });
    await this.#records.createIndex({ run_id: 1, stream_seq: 1 }, { name: "run_order" });
  }

  append(event: ToolgateEvent, streamSeq: number): Promise<"stored" | "duplicate"> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ event, streamSeq, retries: 0, resolve, reject });
      if (!this.#flushing) void this.#drain();
    });
  }

  async #drain(): Promise<void> {
    this.#flushing = true;
    try {
      while (this.#queue.length > 0) {
        const batch = this.#queue.splice(0, MAX_BATCH);
        try {
          await this.#appendBatch(batch);
        } catch (error) {
          for (const p of batch) p.reject(error);
        }
      }
    } finally {
      this.#flushing = false;
    }
  }

  async #appendBatch(batch: Pending[]): Promise<void> {
    let pending = batch;
    while (pending.length > 0) {
      await this.#loadMissingHeads(pending);
      const working = new Map<string, Head | null>();
      const docs: StoredAuditRecord[] = pending.map((p) => {
        const chain = chainOf(p.event);
        const head = working.has(chain) ? working.get(chain)! : (this.#heads.get(chain) ?? null);
        const idx = (head?.idx ?? 0) + 1;
        const prev = head?.hash ?? null;
        const eventJson = canonicalJson(p.event);
        const hash = hashOfText(prev, chain, idx, eventJson);
        working.set(chain, { idx, hash });
        return {
          _id: p.event.id,
          chain_id: chain,
          idx,
          prev_hash: prev,
          hash,
          run_id: p.event.run_id,
          ...(p.event.kind === "call" ? { call_id: p.event.call_id } : {}),
          kind: p.event.kind,
          type: p.event.type,
          stream_seq: p.streamSeq,
          stored_at: new Date(),
          event_json: eventJson,
        };
      });
      let storedCount = docs.length;
      let failure: unknown;
      try {
        // Ordered: everything before the first failure is stored, nothing after it is.
        await this.#records.insertMany(docs, { ordered: true });
      } catch (error) {
        failure = error;
        const first = error instanceof MongoBulkWriteError ? firstWriteError(error) : undefined;
        storedCount = first?.index ?? 0;
        if (!first) storedCount = 0;
      }
      for (let i = 0; i < storedCount; i++) {
        this.#setHead(docs[i]!.chain_id, { idx: docs[i]!.idx, hash: docs[i]!.hash });
        pending[i]!.resolve("stored");
      }
      if (failure === undefined) return;

      const failed = pending[storedCount]!;
      const first = failure instanceof MongoBulkWriteError ? firstWriteError(failure) : undefined;
      this.#heads.delete(chainOf(failed.event));
      if (first?.code !== DUPLICATE_KEY || ++failed.retries > MAX_RETRIES) {
        for (const p of pending.slice(storedCount)) p.reject(failure);
        return;
      }
      // Either the event itself is already stored (a redelivery) or another writer took this position.
      if (await this.#records.countDocuments({ _id: failed.event.id }, { limit: 1 })) {
        failed.resolve("duplicate");
        pending = pending.slice(storedCount + 1);
      } else {
        pending = pending.slice(storedCount);
      }
    }
  }

  async #loadMissingHeads(pending: Pending[]): Promise<void> {
    const missing = new Set<string>();
    for (const p of pending) {
      const chain = chainOf(p.event);
      // A chain's first event needs no lookup; if the chain exists after all, the unique index says so.
      if (!this.#heads.has(chain) && (!startsChain(p.event) || p.retries > 0)) missing.add(chain);
    }
    await Promise.all(
      [...missing].map(async (chain) => {
        const last = await this.#records
          .find({ chain_id: chain }, { projection: { idx: 1, hash: 1 } })
          .sort({ idx: -1 })
          .limit(1)
          .next();
        if (last) this.#setHead(chain, { idx: last.idx, hash: last.hash });
      }),
    );
  }

  #setHead(chain: string, head: Head): void {
    this.#heads.delete(chain);
    this.#heads.set(chain, head);
    if (this.#heads.size > MAX_CACHED_HEADS) {
      const oldest = this.#heads.keys().next().value;
      if (oldest !== undefined) this.#heads.delete(oldest);
    }
  }

  async chain(chainId: string): Promise<AuditRecord[]> {
    return (await this.#records.find({ chain_id: chainId }).sort({ idx: 1 }).toArray()).map(decoded);
  }

  async run(runId: string): Promise<AuditRecord[]> {
    return (await this.#records.find({ run_id: runId }).sort({ stream_seq: 1 }).toArray()).map(decoded);
  }

  async verify(chainId: string): Promise<ChainVerification> {
    const records = await this.#records.find({ chain_id: chainId }).sort({ idx: 1 }).toArray();
    const broken = (brokenAt: number, problem: string): ChainVerification => ({ ok: false, length: records.length, brokenAt, problem });
    let prev: string | null = null;
    for (const [i, r] of records.entries()) {
      if (r.idx !== i + 1) return broken(i + 1, `position ${r.idx} where ${i + 1} was expected`);
      if (r.prev_hash !== prev) return broken(r.idx, "link to the previous record does not match");
      if (typeof r.event_json !== "string" || hashOfText(prev, chainId, r.idx, r.event_json) !== r.hash)
        return broken(r.idx, "record content does not match its hash");
      // The hash covers the event text only: the fields queries use must say what that event says.
      const problem = describedFieldsProblem(r);
      if (problem) return broken(r.idx, problem);
      prev = r.hash;
    }
    return { ok: true, length: records.length, head: prev };
  }

  async recordRejected(rejection: EventRejection, message: { subject: string; streamSeq: number; data: Uint8Array }): Promise<void> {
    const data = Buffer.from(message.data.buffer, message.data.byteOffset, message.data.byteLength);
    try {
      await this.#rejected.insertOne({
        _id: `${message.subject}#${message.streamSeq}`,
        subject: message.subject,
        stream_seq: message.streamSeq,
        reason: rejection.reason,
        detail: rejection.detail,
        bytes: data.byteLength,
        sha256: `sha256:${createHash("sha256").update(data).digest("hex")}`,
        preview: data.subarray(0, 2048).toString("base64"),
        received_at: new Date(),
      });
    } catch (error) {
      if ((error as { code?: number }).code !== DUPLICATE_KEY) throw error;
    }
  }

  /** Rejected messages, newest first. */
  async rejected(limit = 100): Promise<RejectedMessage[]> {
    return this.#rejected.find({}).sort({ received_at: -1 }).limit(limit).toArray();
  }
}

function describedFieldsProblem(r: StoredAuditRecord): string | undefined {
  let event: ToolgateEvent;
  try {
    event = JSON.parse(r.event_json) as ToolgateEvent;
    if (canonicalJson(event) !== r.event_json) return "stored event is not in canonical form";
  } catch {
    return "stored event is not JSON";
  }
  const expected: Partial<StoredAuditRecord> = {
    _id: event.id,
    chain_id: chainOf(event),
    run_id: event.run_id,
    kind: event.kind,
    type: event.type,
    ...(event.kind === "call" ? { call_id: event.call_id } : {}),
  };
  for (const [field, value] of Object.entries(expected)) {
    if (r[field as keyof StoredAuditRecord] !== value) return `field ${field} does not match the hashed event`;
  }
  if (event.kind === "run" && r.call_id !== undefined) return "field call_id does not match the hashed event";
  return undefined;
}

function firstWriteError(error: MongoBulkWriteError): { index: number; code: number } | undefined {
  return writeErrorsOf(error)[0];
}
