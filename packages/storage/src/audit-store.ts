import { createHash } from "node:crypto";
import { canonicalJson, idTime, sha256, type EventRejection, type EventTrust, type SignatureFacts, type ToolgateEvent } from "@toolgate/contracts";
import type { Collection, Db } from "mongodb";
import { DUPLICATE_KEY } from "./insert-batcher.js";

/** One stored event, linked to the previous event of the same call (or run) by hash. */
export interface AuditRecord {
  /** The event id: an event is stored once, whoever delivers it again. */
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
  /** The ledger block the record is stored in. */
  block: number;
  event: ToolgateEvent;
  /** The signature header the event arrived with (undefined: unsigned, or stored before events were signed). */
  signature?: string;
  /** sha256 (hex) of the message's exact bytes: what the signature covers. */
  digest?: string;
}

/** One event as a block keeps it: its place in its chain and its RFC 8785 text, exactly what its hash covers. */
interface BlockRecord {
  id: string;
  chain_id: string;
  idx: number;
  prev_hash: string | null;
  hash: string;
  stream_seq: number;
  event_json: string;
  /**
   * sha256 (hex) of the message bytes audit received, and the signature header they came with. The event is kept
   * redacted, so its signature is checked against this digest, which audit computed from the bytes themselves
   * and which the record's hash covers. Absent in records stored before events were signed.
   */
  digest?: string;
  signature?: string | null;
}

/**
 * One block of the audit ledger: the events stored by one insert, in arrival order, linked to the block before
 * it by hash. Blocks are numbered densely from 1 and the number is the `_id`, so the insert of block n is the
 * compare-and-set among writers (atomic on MongoDB and FerretDB alike). `chain_id` and `run_id` list who the
 * block's events belong to, for the lookups (a multikey index on MongoDB, a GIN index on FerretDB).
 */
interface AuditBlock {
  _id: string;
  n: number;
  prev_hash: string | null;
  /** sha256 over prev_hash, n, the chain and run lists and records_json. */
  hash: string;
  chain_id: string[];
  run_id: string[];
  writer: string;
  stored_at: Date;
  /**
   * The records as JSON text: events carry untrusted data whose keys may start with "$" or contain ".", which a
   * document field cannot; and one field per block is what makes a block cheap to store.
   */
  records_json: string;
}

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

/** Result of re-computing the whole ledger's block links. */
export type LedgerVerification = { ok: true; blocks: number; head: string | null } | { ok: false; blocks: number; brokenAt: number; problem: string };

/** The append-only audit log. */
export interface AuditStore {
  /**
   * Stores `event` once; a redelivered event returns "duplicate". Appends are linked per chain in arrival order. A
   * message with the id of a stored event but other bytes (`signature.digest`) is stored too: a forgery that took
   * an event's id first must not hide the real transition.
   */
  append(event: ToolgateEvent, streamSeq: number, signature?: SignatureFacts): Promise<"stored" | "duplicate">;
  /** Every event of one call (or the run's own events), in chain order. */
  chain(chainId: string): Promise<AuditRecord[]>;
  /** Every event of a run, calls included, in stream order. */
  run(runId: string): Promise<AuditRecord[]>;
  /** Re-computes every hash and link of a chain, and of the blocks that hold it. */
  verify(chainId: string): Promise<ChainVerification>;
  recordRejected(rejection: EventRejection, message: { subject: string; streamSeq: number; data: Uint8Array }): Promise<void>;
}

interface ChainState {
  idx: number;
  hash: string | null;
  /** What was stored in the chain (see {@link storedKey}), to recognise a redelivery. */
  ids: Set<string>;
}

interface Pending {
  event: ToolgateEvent;
  streamSeq: number;
  signature: SignatureFacts | undefined;
  resolve: (outcome: "stored" | "duplicate") => void;
  reject: (error: unknown) => void;
}

export interface AuditStoreOptions {
  collection?: string;
  /** Who writes (for the record); the instance id. */
  writer?: string;
  /** Chains kept in memory; beyond it the least recently used are read back when they continue. */
  maxCachedChains?: number;
  /**
   * How long an event waits for others to share its block when nothing is being stored (0: not at all).
   * Under load a block collects what arrives while the previous insert is in flight, and no event waits.
   */
  lingerMs?: number;
  /** The keys events are signed with: `verify` then also checks that each event was signed by its owner. */
  trust?: EventTrust;
  now?: () => number;
}

/** Events per block; under load a block collects what arrived while the previous insert was in flight. */
const MAX_BLOCK_EVENTS = 256;
const MAX_BLOCK_BYTES = 4 * 1024 * 1024;
/**
 * Chain ids per block. FerretDB indexes the list as one value, and PostgreSQL refuses index entries above
 * ~2.7 KB: 48 ids of 31 characters stay well below.
 */
const MAX_BLOCK_CHAINS = 48;
/** Conflicts with other writers one batch survives before its appends fail (and are delivered again). */
const MAX_ROUNDS = 64;
/**
 * Clock skew allowed between the processes that mint ids and the writers that stamp blocks: a chain minted
 * before the newest block this writer did not write itself (plus this margin) may be stored already, so its
 * first event is looked up.
 */
const FRESHNESS_MARGIN_MS = 10_000;

/** Hash of one record: binds the event (and the digest and signature it arrived with) to its place in its chain. */
export function recordHash(prevHash: string | null, chainId: string, idx: number, event: ToolgateEvent, signature?: SignatureFacts): string {
  return hashOfText(prevHash, chainId, idx, canonicalJson(event), signature?.digest, signature?.header ?? null);
}

function hashOfText(prevHash: string | null, chainId: string, idx: number, eventJson: string, digest?: string, signature?: string | null): string {
  const signed = digest === undefined ? "" : `\n${digest}\n${signature ?? ""}`;
  return sha256(`${prevHash ?? ""}\n${chainId}\n${idx}\n${eventJson}${signed}`);
}

/**
 * How a chain knows what it holds: the event id and, for a signed message, the digest of its bytes — so a
 * redelivery is recognised, and a second message under a stored event's id (a forgery that came first, or the
 * real event after one) is kept as well.
 */
function storedKey(id: string, digest: string | undefined): string {
  return digest === undefined ? id : `${id}#${digest}`;
}

function blockHash(block: Pick<AuditBlock, "prev_hash" | "n" | "chain_id" | "run_id" | "records_json">): string {
  return sha256(`${block.prev_hash ?? ""}\n${block.n}\n${block.chain_id.join(",")}\n${block.run_id.join(",")}\n${block.records_json}`);
}

/** Block ids sort like their numbers. */
function blockId(n: number): string {
  return `b${String(n).padStart(12, "0")}`;
}

function chainOf(event: ToolgateEvent): string {
  return event.kind === "call" ? event.call_id : event.run_id;
}

function startsChain(event: ToolgateEvent): boolean {
  return (event.kind === "call" && event.type === "proposed") || (event.kind === "run" && event.type === "started");
}

function parseRecords(block: AuditBlock): BlockRecord[] {
  return JSON.parse(block.records_json) as BlockRecord[];
}

/**
 * {@link AuditStore} on MongoDB as a ledger of blocks. Appends are serialized in this process: each batch
 * (whatever arrived while the previous insert was in flight) becomes one block, so storing an event costs a
 * share of one insert instead of an insert of its own. Every record keeps its call's (or run's) hash chain,
 * every block the ledger's. Several writers (replicas) stay consistent: block n is claimed by a unique insert,
 * and a writer that loses reads the blocks it missed, drops what they already hold and links its events after
 * them. The event id is recognised in its chain, so storage is exactly-once under at-least-once delivery.
 */
export class MongoAuditStore implements AuditStore {
  readonly #blocks: Collection<AuditBlock>;
  readonly #rejected: Collection<RejectedMessage>;
  readonly #writer: string;
  readonly #maxChains: number;
  readonly #lingerMs: number;
  readonly #now: () => number;
  readonly #trust: EventTrust | undefined;
  readonly #chains = new Map<string, ChainState>();
  /** The last block this writer knows of; located on the first append. */
  #head: { n: number; hash: string | null } | undefined;
  /**
   * Chains minted before this time may be stored without being in memory (in blocks stored before this writer
   * found the head, or dropped from memory since): their first event is looked up. Chains minted after it are
   * new when unknown.
   */
  #horizon = -Infinity;
  #queue: Pending[] = [];
  #flushing = false;
  #lingering: NodeJS.Timeout | undefined;

  constructor(db: Db, options: AuditStoreOptions = {}) {
    const name = options.collection ?? "audit_log";
    this.#blocks = db.collection<AuditBlock>(name);
    this.#rejected = db.collection<RejectedMessage>(`${name}_rejected`);
    this.#writer = options.writer ?? `audit-${process.pid}`;
    this.#maxChains = options.maxCachedChains ?? 100_000;
    this.#lingerMs = options.lingerMs ?? 0;
    this.#now = options.now ?? Date.now;
    this.#trust = options.trust;
  }

  /** Creates the indexes the log relies on; idempotent. */
  async ensureIndexes(): Promise<void> {
    await this.#blocks.createIndex({ chain_id: 1 }, { name: "chains" });
    await this.#blocks.createIndex({ run_id: 1 }, { name: "runs" });
  }

  append(event: ToolgateEvent, streamSeq: number, signature?: SignatureFacts): Promise<"stored" | "duplicate"> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ event, streamSeq, signature, resolve, reject });
      if (this.#flushing) return;
      if (this.#lingerMs > 0 && this.#queue.length < MAX_BLOCK_EVENTS) {
        this.#lingering ??= setTimeout(() => {
          this.#lingering = undefined;
          if (!this.#flushing) void this.#drain();
        }, this.#lingerMs);
        return;
      }
      clearTimeout(this.#lingering);
      this.#lingering = undefined;
      void this.#drain();
    });
  }

  async #drain(): Promise<void> {
    this.#flushing = true;
    try {
      while (this.#queue.length > 0) {
        const batch = this.#queue.splice(0, MAX_BLOCK_EVENTS);
        try {
          const rest = await this.#appendBatch(batch);
          // What did not fit in the block goes first into the next one, keeping arrival order.
          this.#queue.unshift(...rest);
        } catch (error) {
          // These events may or may not be stored: they are delivered again, and the head and every chain are
          // read back first (the block that failed to answer may be the head now).
          this.#head = undefined;
          this.#chains.clear();
          for (const p of batch) p.reject(error);
        }
      }
    } finally {
      this.#flushing = false;
    }
  }

  /** Stores a prefix of `batch` as one block (settling each of its appends); returns the appends left over. */
  async #appendBatch(batch: Pending[]): Promise<Pending[]> {
    let pending = batch;
    for (let round = 0; round < MAX_ROUNDS; round++) {
      this.#head ??= await this.#locateHead();
      await this.#loadChains(pending);
      const { block, records, duplicates, stored, rest } = this.#build(pending, this.#head);
      for (const p of duplicates) p.resolve("duplicate");
      if (!block) return rest;
      try {
        await this.#blocks.insertOne(block);
      } catch (error) {
        if ((error as { code?: unknown }).code !== DUPLICATE_KEY) throw error;
        // Another writer stored block n first: learn what it holds, then link after it.
        await this.#catchUp();
        pending = [...stored, ...rest];
        continue;
      }
      this.#apply(block, records);
      for (const p of stored) p.resolve("stored");
      return rest;
    }
    throw new Error(`audit block not stored after ${MAX_ROUNDS} conflicts with other writers`);
  }

  /**
   * The next block for the longest prefix of `pending` that fits: the records of new events, and the appends
   * that are redeliveries of stored events. Events past the first one that does not fit are left in `rest`.
   */
  #build(
    pending: Pending[],
    head: { n: number; hash: string | null },
  ): { block: AuditBlock | undefined; records: BlockRecord[]; duplicates: Pending[]; stored: Pending[]; rest: Pending[] } {
    const working = new Map<string, ChainState>();
    const records: BlockRecord[] = [];
    const duplicates: Pending[] = [];
    const stored: Pending[] = [];
    const chains = new Set<string>();
    const runs = new Set<string>();
    let bytes = 0;
    let i = 0;
    for (; i < pending.length; i++) {
      const p = pending[i]!;
      const chain = chainOf(p.event);
      const state = working.get(chain) ?? this.#chains.get(chain) ?? { idx: 0, hash: null, ids: new Set<string>() };
      const key = storedKey(p.event.id, p.signature?.digest);
      if (state.ids.has(key)) {
        duplicates.push(p);
        continue;
      }
      const eventJson = canonicalJson(p.event);
      if (records.length > 0 && (bytes + eventJson.length > MAX_BLOCK_BYTES || (!chains.has(chain) && chains.size >= MAX_BLOCK_CHAINS))) break;
      const idx = state.idx + 1;
      const signed = p.signature ? { digest: p.signature.digest, signature: p.signature.header ?? null } : {};
      const hash = hashOfText(state.hash, chain, idx, eventJson, signed.digest, signed.signature);
      working.set(chain, { idx, hash, ids: new Set([...state.ids, key]) });
      records.push({ id: p.event.id, chain_id: chain, idx, prev_hash: state.hash, hash, stream_seq: p.streamSeq, event_json: eventJson, ...signed });
      stored.push(p);
      chains.add(chain);
      runs.add(p.event.run_id);
      bytes += eventJson.length;
    }
    if (records.length === 0) return { block: undefined, records, duplicates, stored, rest: pending.slice(i) };
    const n = head.n + 1;
    const partial = { n, prev_hash: head.hash, chain_id: [...chains], run_id: [...runs], records_json: JSON.stringify(records) };
    const block: AuditBlock = { _id: blockId(n), ...partial, hash: blockHash(partial), writer: this.#writer, stored_at: new Date(this.#now()) };
    return { block, records, duplicates, stored, rest: pending.slice(i) };
  }

  /** Makes `block` (stored by this writer or read back) the head and its records part of their chains. */
  #apply(block: AuditBlock, records: readonly BlockRecord[]): void {
    this.#head = { n: block.n, hash: block.hash };
    for (const r of records) {
      let state = this.#chains.get(r.chain_id);
      if (!state) {
        // Only a chain seen from its first record is complete here; any other is read back when it continues.
        if (r.idx !== 1) continue;
        state = { idx: 0, hash: null, ids: new Set() };
      }
      state.idx = r.idx;
      state.hash = r.hash;
      state.ids.add(storedKey(r.id, r.digest));
      this.#cache(r.chain_id, state);
    }
  }

  /** Reads the blocks other writers stored after this writer's head, in order. */
  async #catchUp(): Promise<void> {
    for (;;) {
      const head = this.#head!;
      const next = await this.#blocks.findOne({ _id: blockId(head.n + 1) });
      if (!next) return;
      this.#apply(next, parseRecords(next));
    }
  }

  /**
   * The last block: found by probing block ids (1, 2, 4, … then halving), a few dozen lookups by `_id` however
   * long the ledger is — never a scan or a sort, which FerretDB would do in full.
   */
  async #locateHead(): Promise<{ n: number; hash: string | null }> {
    const exists = async (n: number) => (await this.#blocks.findOne({ _id: blockId(n) }, { projection: { n: 1 } })) !== null;
    if (!(await exists(1))) return { n: 0, hash: null };
    let low = 1;
    let high = 2;
    while (await exists(high)) {
      low = high;
      high *= 2;
    }
    // Invariant: block `low` exists, block `high` does not.
    while (high - low > 1) {
      const mid = Math.floor((low + high) / 2);
      if (await exists(mid)) low = mid;
      else high = mid;
    }
    const head = await this.#blocks.findOne({ _id: blockId(low) }, { projection: { n: 1, hash: 1, stored_at: 1 } });
    // Whatever is stored was stored by then: a chain minted later cannot be in the ledger yet.
    if (head) this.#horizon = Math.max(this.#horizon, head.stored_at.getTime() + FRESHNESS_MARGIN_MS);
    return { n: low, hash: head?.hash ?? null };
  }

  /** Reads the state of the batch's chains this writer does not hold and cannot know to be new. */
  async #loadChains(pending: readonly Pending[]): Promise<void> {
    const missing = new Set<string>();
    const fresh = new Set<string>();
    for (const p of pending) {
      const chain = chainOf(p.event);
      if (this.#chains.has(chain) || missing.has(chain) || fresh.has(chain)) continue;
      // A chain's first event needs no lookup when the chain was minted after this writer knew every block.
      if (startsChain(p.event) && (idTime(chain) ?? 0) > this.#horizon) fresh.add(chain);
      else missing.add(chain);
    }
    await Promise.all([...missing].map(async (chain) => this.#cache(chain, stateOf(await this.#recordsOf(chain, this.#head!.n)))));
  }

  /** The stored records of one chain in blocks up to `upTo`, in chain order. */
  async #recordsOf(chain: string, upTo = Infinity): Promise<(BlockRecord & { block: AuditBlock })[]> {
    const blocks = await this.#blocks.find({ chain_id: chain }).toArray();
    return blocks
      .filter((b) => b.n <= upTo)
      .flatMap((block) =>
        parseRecords(block)
          .filter((r) => r.chain_id === chain)
          .map((r) => ({ ...r, block })),
      )
      .sort((a, b) => a.idx - b.idx || a.block.n - b.block.n);
  }

  #cache(chain: string, state: ChainState): void {
    this.#chains.delete(chain);
    this.#chains.set(chain, state);
    if (this.#chains.size <= this.#maxChains) return;
    const oldest = this.#chains.keys().next().value!;
    this.#chains.delete(oldest);
    // A chain dropped from memory may continue later: chains up to its age are looked up from now on.
    this.#horizon = Math.max(this.#horizon, (idTime(oldest) ?? 0) + FRESHNESS_MARGIN_MS);
  }

  async chain(chainId: string): Promise<AuditRecord[]> {
    return (await this.#recordsOf(chainId)).map(toRecord);
  }

  async run(runId: string): Promise<AuditRecord[]> {
    const blocks = await this.#blocks.find({ run_id: runId }).toArray();
    return blocks
      .flatMap((block) => parseRecords(block).map((r) => ({ ...r, block })))
      .map(toRecord)
      .filter((r) => r.run_id === runId)
      .sort((a, b) => a.stream_seq - b.stream_seq || a.block - b.block);
  }

  async verify(chainId: string): Promise<ChainVerification> {
    const records = await this.#recordsOf(chainId);
    const broken = (brokenAt: number, problem: string): ChainVerification => ({ ok: false, length: records.length, brokenAt, problem });
    let prev: string | null = null;
    for (const [i, r] of records.entries()) {
      if (r.idx !== i + 1) return broken(i + 1, `position ${r.idx} where ${i + 1} was expected`);
      if (r.prev_hash !== prev) return broken(r.idx, "link to the previous record does not match");
      if (typeof r.event_json !== "string" || hashOfText(prev, chainId, r.idx, r.event_json, r.digest, r.signature) !== r.hash)
        return broken(r.idx, "record content does not match its hash");
      const described = describedEvent(r, chainId);
      const problem = typeof described === "string" ? described : this.#signatureProblem(described, r);
      if (problem) return broken(r.idx, problem);
      prev = r.hash;
    }
    // The blocks that hold the chain: their own hashes, and the next block's link to each.
    const firstInBlock = new Map<number, BlockRecord & { block: AuditBlock }>();
    for (const r of records) if (!firstInBlock.has(r.block.n)) firstInBlock.set(r.block.n, r);
    for (const first of firstInBlock.values()) {
      const problem = await this.#blockProblem(first.block);
      if (problem) return broken(first.idx, problem);
    }
    return { ok: true, length: records.length, head: prev };
  }

  /**
   * Why a record's event is not shown to be its owner's (with a trust list): unsigned, signed by an unknown key,
   * a signature that does not verify over the digest audit took of the bytes, or a key of a role that does not
   * publish this event type.
   */
  #signatureProblem(event: ToolgateEvent, r: BlockRecord): string | undefined {
    if (!this.#trust) return undefined;
    const what = `${event.kind}.${event.type} ${event.id} (claimed by ${event.source})`;
    if (r.digest === undefined) return `${what} is unsigned`;
    const problem = this.#trust.check(event, { header: r.signature ?? undefined, digest: r.digest });
    return problem === undefined ? undefined : `${what} is not signed by its owner: ${problem.replace(/_/g, " ")}`;
  }

  /** Why a block is not what was stored (its content or the next block's link to it), or undefined. */
  async #blockProblem(block: AuditBlock): Promise<string | undefined> {
    if (block._id !== blockId(block.n) || blockHash(block) !== block.hash) return `block ${block.n} does not match its hash`;
    const next = await this.#blocks.findOne({ _id: blockId(block.n + 1) }, { projection: { prev_hash: 1 } });
    if (next && next.prev_hash !== block.hash) return `block ${block.n + 1} does not link to block ${block.n}`;
    return undefined;
  }

  /**
   * Re-computes every block's hash and link from block 1 to the head, reading `batch` blocks at a time by id.
   * Catches a block removed or rewritten anywhere, which no single chain's verification can see.
   */
  async verifyLedger(batch = 32): Promise<LedgerVerification> {
    let prev: string | null = null;
    let n = 1;
    for (;;) {
      const ids = Array.from({ length: batch }, (_, i) => blockId(n + i));
      const found = await Promise.all(ids.map((id) => this.#blocks.findOne({ _id: id })));
      for (let i = 0; i < batch; i++, n++) {
        const block = found[i];
        if (!block) {
          const later = await this.#blocks.findOne({ _id: blockId(n + 1) }, { projection: { n: 1 } });
          if (later) return { ok: false, blocks: n - 1, brokenAt: n, problem: `block ${n} is missing` };
          return { ok: true, blocks: n - 1, head: prev };
        }
        if (block.prev_hash !== prev) return { ok: false, blocks: n, brokenAt: n, problem: `block ${n} does not link to block ${n - 1}` };
        if (blockHash(block) !== block.hash) return { ok: false, blocks: n, brokenAt: n, problem: `block ${n} does not match its hash` };
        prev = block.hash;
      }
    }
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

function stateOf(records: readonly BlockRecord[]): ChainState {
  const last = records.at(-1);
  return { idx: last?.idx ?? 0, hash: last?.hash ?? null, ids: new Set(records.map((r) => storedKey(r.id, r.digest))) };
}

function toRecord(r: BlockRecord & { block: AuditBlock }): AuditRecord {
  const event = JSON.parse(r.event_json) as ToolgateEvent;
  return {
    _id: r.id,
    chain_id: r.chain_id,
    idx: r.idx,
    prev_hash: r.prev_hash,
    hash: r.hash,
    run_id: event.run_id,
    ...(event.kind === "call" ? { call_id: event.call_id } : {}),
    kind: event.kind,
    type: event.type,
    stream_seq: r.stream_seq,
    stored_at: r.block.stored_at,
    block: r.block.n,
    event,
    ...(r.digest === undefined ? {} : { digest: r.digest }),
    ...(typeof r.signature === "string" ? { signature: r.signature } : {}),
  };
}

/**
 * The hashed event of a record, or why what the record says about it (its id, its chain) does not match it: the
 * hash covers the event text (and the digest and signature it arrived with), not the record's other fields.
 */
function describedEvent(r: BlockRecord, chainId: string): ToolgateEvent | string {
  let event: ToolgateEvent;
  try {
    event = JSON.parse(r.event_json) as ToolgateEvent;
    if (canonicalJson(event) !== r.event_json) return "stored event is not in canonical form";
  } catch {
    return "stored event is not JSON";
  }
  if (r.id !== event.id) return "field id does not match the hashed event";
  if (r.chain_id !== chainId || chainOf(event) !== chainId) return "field chain_id does not match the hashed event";
  return event;
}
