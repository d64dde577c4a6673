import { MongoServerError, type Collection, type Db } from "mongodb";
import { evidenceId, EvidenceStoreError, type EvidenceRecord, type EvidenceStore, type NewEvidence, type SaveEvidenceResult } from "./evidence-store.js";

/** Options of {@link MongoEvidenceStore}. */
export interface MongoEvidenceStoreOptions {
  /** Collection name; default "evidence". */
  collection?: string | undefined;
}

interface EvidenceDocument {
  _id: string;
  task_id: string;
  idempotency_key: string;
  claim: string;
  source_url: string;
  quote?: string;
  created_at: Date;
}

const DUPLICATE_KEY = 11000;
const DEDUP_INDEX = "task_id_1_idempotency_key_1";

/**
 * {@link EvidenceStore} on a Mongo wire-compatible server (MongoDB, FerretDB). Single-document operations
 * only: dedup is a unique index on (task_id, idempotency_key) plus a plain insert, never a transaction or
 * an upsert. Driver errors propagate unchanged.
 */
export class MongoEvidenceStore implements EvidenceStore {
  readonly #collection: Collection<EvidenceDocument>;

  constructor(db: Db, options: MongoEvidenceStoreOptions = {}) {
    // `journal` is the driver's current spelling of `j: true`: acknowledged only once the write is journaled.
    this.#collection = db.collection<EvidenceDocument>(options.collection ?? "evidence", { writeConcern: { w: 1, journal: true } });
  }

  /** Creates the unique (task_id, idempotency_key) index the dedup relies on; a no-op when it exists. */
  async ensureIndexes(): Promise<void> {
    await this.#collection.createIndex({ task_id: 1, idempotency_key: 1 }, { unique: true, name: DEDUP_INDEX });
  }

  /** Inserts; on duplicate key (code 11000) reads back the record that won and reports `created: false`. */
  async save(evidence: NewEvidence): Promise<SaveEvidenceResult> {
    const document: EvidenceDocument = {
      _id: evidenceId(evidence.taskId, evidence.idempotencyKey),
      task_id: evidence.taskId,
      idempotency_key: evidence.idempotencyKey,
      claim: evidence.claim,
      source_url: evidence.sourceUrl,
      ...(evidence.quote === undefined ? {} : { quote: evidence.quote }),
      created_at: new Date(),
    };
    try {
      await this.#collection.insertOne(document);
      return { record: toRecord(document), created: true };
    } catch (error) {
      // An upsert could not tell "created" from "replayed"; the failed insert is that answer, race-free.
      if (!(error instanceof MongoServerError && error.code === DUPLICATE_KEY)) throw error;
    }
    const existing = await this.#collection.findOne({ task_id: evidence.taskId, idempotency_key: evidence.idempotencyKey });
    if (existing === null) {
      throw new EvidenceStoreError(`duplicate key on save but no evidence for task ${evidence.taskId} and this key`);
    }
    return { record: toRecord(existing), created: false };
  }

  /** Every record of `taskId`, oldest first (ties by id). */
  async listByTask(taskId: string): Promise<EvidenceRecord[]> {
    const documents = await this.#collection.find({ task_id: taskId }).sort({ created_at: 1, _id: 1 }).toArray();
    return documents.map(toRecord);
  }
}

function toRecord(document: EvidenceDocument): EvidenceRecord {
  return {
    evidenceId: document._id,
    taskId: document.task_id,
    claim: document.claim,
    sourceUrl: document.source_url,
    ...(document.quote === undefined ? {} : { quote: document.quote }),
    idempotencyKey: document.idempotency_key,
    createdAt: document.created_at,
  };
}
