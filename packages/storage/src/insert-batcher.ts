import { BSON, MongoBulkWriteError, type Collection, type Document, type OptionalUnlessRequiredId } from "mongodb";

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

/**
 * Coalesces concurrent single-document inserts into unordered `insertMany` commands. Each caller learns
 * whether its own document was inserted or hit a unique key; any other failure rejects that caller.
 * Idle callers are flushed once the current turn of the event loop has run — no timer, no added wait, but
 * what that turn inserted goes in one command; under load, documents queue behind in-flight commands.
 */
export class InsertBatcher<T extends Document> {
  readonly #collection: Collection<T>;
  readonly #options: InsertBatcherOptions;
  #queue: QueuedInsert<T>[] = [];
  #inFlight = 0;
  #scheduled = false;

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
      const batch = this.#queue.splice(0, this.#options.maxBatch);
      this.#inFlight += 1;
      void this.#flush(batch).finally(() => {
        this.#inFlight -= 1;
        this.#pump();
      });
    }
  }

  async #flush(batch: QueuedInsert<T>[]): Promise<void> {
    try {
      await this.#collection.insertMany(
        batch.map((b) => b.doc),
        { ordered: false },
      );
      for (const b of batch) b.resolve("inserted");
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
        if (code === undefined) b.resolve("inserted");
        else if (code === DUPLICATE_KEY) b.resolve("duplicate");
        else b.reject(error);
      });
    }
  }
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
