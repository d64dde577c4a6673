import { BSON, MongoBulkWriteError, MongoServerError, MongoWriteConcernError, type Collection, type Document, type OptionalUnlessRequiredId } from "mongodb";

/** Whether one document was stored or its unique key already existed. */
export type InsertOutcome = "inserted" | "duplicate";

export interface InsertBatcherOptions {
  /** Documents per insertMany. */
  maxBatch: number;
  /** insertMany commands in flight at once. */
  maxInFlight: number;
}

interface QueuedInsert<T extends Document> {
  doc: OptionalUnlessRequiredId<T>;
  resolve: (outcome: InsertOutcome) => void;
  reject: (error: unknown) => void;
}

/** Mongo's duplicate-key error code, also returned by FerretDB. */
export const DUPLICATE_KEY = 11000;

/** How many recently stored ids a batcher remembers, to keep their likely duplicates out of its batches. */
const KNOWN_IDS = 10_000;

/**
 * Coalesces concurrent single-document inserts into unordered `insertMany` commands (a lone document goes as
 * `insertOne`). Each caller learns whether its own document was inserted or hit a unique key; any other failure
 * rejects that caller.
 * Idle callers are flushed once the current turn of the event loop has run — no timer, no added wait, but
 * what that turn inserted goes in one command; under load, documents queue behind in-flight commands.
 *
 * A batch holding one duplicate costs FerretDB several times a clean one (it falls back to inserting each
 * document on its own), and under a retry storm nearly every batch would hold one. So a document whose `_id`
 * this batcher stored or found stored recently, or that repeats an `_id` of its own batch, is sent alone once
 * that batch is done: the server still decides, and the batch stays clean.
 */
export class InsertBatcher<T extends Document> {
  readonly #collection: Collection<T>;
  readonly #options: InsertBatcherOptions;
  #queue: QueuedInsert<T>[] = [];
  #inFlight = 0;
  #scheduled = false;
  /** Ids recently inserted or found to exist, oldest first. */
  readonly #known = new Set<string>();

  constructor(collection: Collection<T>, options: InsertBatcherOptions = { maxBatch: 512, maxInFlight: 1 }) {
    this.#collection = collection;
    this.#options = options;
  }

  /** Inserts `doc` as part of the next batch. */
  insert(doc: OptionalUnlessRequiredId<T>): Promise<InsertOutcome> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ doc, resolve, reject });
      if (this.#scheduled || this.#inFlight >= this.#options.maxInFlight) return;
      this.#scheduled = true;
      setImmediate(() => {
        this.#scheduled = false;
        this.#pump();
      });
    });
  }

  #pump(): void {
    while (this.#inFlight < this.#options.maxInFlight && this.#queue.length > 0) {
      const { clean, suspect } = this.#split(this.#queue.splice(0, this.#options.maxBatch));
      this.#inFlight += 1;
      const flushed = this.#flush(clean)
        // No caller is left waiting, whatever fails (rejecting a settled caller does nothing).
        .catch((error: unknown) => clean.forEach((c) => c.reject(error)))
        .finally(() => {
          this.#inFlight -= 1;
          this.#pump();
        });
      if (suspect.length > 0) {
        void flushed.then(() => Promise.all(suspect.map((s) => this.#flush([s]).catch((error: unknown) => s.reject(error)))));
      }
    }
  }

  /** The documents to batch, and those likely to be duplicates (an id known to exist, or seen earlier in the batch). */
  #split(batch: QueuedInsert<T>[]): { clean: QueuedInsert<T>[]; suspect: QueuedInsert<T>[] } {
    const clean: QueuedInsert<T>[] = [];
    const suspect: QueuedInsert<T>[] = [];
    const ids = new Set<string>();
    for (const queued of batch) {
      const id = idOf(queued.doc);
      if (id !== undefined && (this.#known.has(id) || ids.has(id))) suspect.push(queued);
      else {
        if (id !== undefined) ids.add(id);
        clean.push(queued);
      }
    }
    return { clean, suspect };
  }

  /** Resolves a caller, remembering that its document's id exists now. */
  #settle(queued: QueuedInsert<T>, outcome: InsertOutcome): void {
    const id = idOf(queued.doc);
    if (id !== undefined) {
      this.#known.delete(id);
      this.#known.add(id);
      if (this.#known.size > KNOWN_IDS) this.#known.delete(this.#known.values().next().value!);
    }
    queued.resolve(outcome);
  }

  async #flush(batch: QueuedInsert<T>[]): Promise<void> {
    if (batch.length === 0) return;
    if (batch.length === 1) return this.#flushOne(batch[0]!);
    try {
      await this.#collection.insertMany(
        batch.map((b) => b.doc),
        { ordered: false },
      );
      for (const b of batch) this.#settle(b, "inserted");
    } catch (error) {
      // One document the driver cannot encode or the server refuses outright fails the whole command: each is
      // tried on its own, so that one caller's bad document is not every other caller's failure.
      if (batch.length > 1 && refusedWhole(error)) {
        for (const b of batch) await this.#flush([b]);
        return;
      }
      if (!(error instanceof MongoBulkWriteError)) {
        for (const b of batch) b.reject(error);
        return;
      }
      const failed = new Map<number, number>();
      for (const w of writeErrorsOf(error)) failed.set(w.index, w.code);
      // A bulk error without per-document errors (write concern, network) says nothing about which were stored.
      if (failed.size === 0) {
        for (const b of batch) b.reject(error);
        return;
      }
      batch.forEach((b, i) => {
        const code = failed.get(i);
        if (code === undefined) this.#settle(b, "inserted");
        else if (code === DUPLICATE_KEY) this.#settle(b, "duplicate");
        else b.reject(error);
      });
    }
  }

  /**
   * A lone document (every batch at rest) goes as `insertOne`: the same command on the wire, but the driver's
   * bulk path costs ~20 % more of the client's CPU per command (407–451 against 487–588 µs per insert here).
   */
  async #flushOne(queued: QueuedInsert<T>): Promise<void> {
    try {
      await this.#collection.insertOne(queued.doc);
      this.#settle(queued, "inserted");
    } catch (error) {
      if (isDuplicateKey(error)) this.#settle(queued, "duplicate");
      else queued.reject(error);
    }
  }
}

/** Whether a failed `insertOne` was refused for its unique key alone (a write concern failure says nothing). */
function isDuplicateKey(error: unknown): boolean {
  return error instanceof MongoServerError && !(error instanceof MongoWriteConcernError) && error.code === DUPLICATE_KEY;
}

/** A document's `_id` when it is a string (the ids this project inserts are). */
function idOf(doc: Document): string | undefined {
  const id: unknown = doc._id;
  return typeof id === "string" ? id : undefined;
}

/**
 * Whether a failed insert stored nothing and names no document: the driver could not encode the command, or
 * the server refused it as a whole (an error code, nothing inserted, no per-document or write-concern error) —
 * as FerretDB on PostgreSQL does for a string holding U+0000. Not a connection failure (those carry no code).
 */
function refusedWhole(error: unknown): boolean {
  if (BSON.BSONError.isBSONError(error)) return true;
  return (
    error instanceof MongoBulkWriteError &&
    typeof error.code === "number" &&
    writeErrorsOf(error).length === 0 &&
    error.writeConcernError === undefined &&
    error.result.insertedCount === 0
  );
}

/**
 * The per-document errors of a bulk write, sorted by index; empty when the failure was not per document
 * (a write concern error, for instance). Package-internal.
 */
export function writeErrorsOf(error: MongoBulkWriteError): { index: number; code: number }[] {
  const raw: unknown = error.writeErrors;
  const list: unknown[] = Array.isArray(raw) ? raw : [raw];
  return list
    .filter((w): w is { index: unknown; code: unknown } => typeof w === "object" && w !== null && "index" in w && "code" in w)
    .map((w) => ({ index: Number(w.index), code: Number(w.code) }))
    .sort((a, b) => a.index - b.index);
}
