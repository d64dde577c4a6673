import { createHash } from "node:crypto";

/** A finding saved for a research task: a claim, where it comes from, and the call that saved it. */
export interface EvidenceRecord {
  evidenceId: string;
  taskId: string;
  claim: string;
  sourceUrl: string;
  quote?: string;
  /** The runtime's idempotency key of the call that created the record. */
  idempotencyKey: string;
  createdAt: Date;
}

/** What a caller asks to save; the store derives the id and the timestamp. */
export interface NewEvidence {
  taskId: string;
  claim: string;
  sourceUrl: string;
  quote?: string;
  idempotencyKey: string;
}

/** Result of {@link EvidenceStore.save}: the stored record and whether this call created it. */
export interface SaveEvidenceResult {
  record: EvidenceRecord;
  /** False when a record with the same task and idempotency key already existed (a replay). */
  created: boolean;
}

/**
 * Port for persisted evidence. `save` is idempotent per (task, idempotency key): a replay returns the first
 * record unchanged with `created: false`, even when two saves race. Infrastructure failures throw.
 */
export interface EvidenceStore {
  /** Stores the evidence once per (task, key); returns the existing record on replay. */
  save(evidence: NewEvidence): Promise<SaveEvidenceResult>;
  /** Every record of `taskId`, oldest first. */
  listByTask(taskId: string): Promise<EvidenceRecord[]>;
  /** Creates whatever indexes the dedup guarantee relies on; safe to call repeatedly. */
  ensureIndexes(): Promise<void>;
}

/** A store failure that is neither a driver error nor expected (e.g. a duplicate key whose record is missing). */
export class EvidenceStoreError extends Error {
  readonly code = "EVIDENCE_STORE_INCONSISTENT";
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "EvidenceStoreError";
  }
}

/** Deterministic evidence id: `ev_` + 16 hex of sha256 over the task and key, so a replay yields the same id. */
export function evidenceId(taskId: string, idempotencyKey: string): string {
  // A newline cannot occur in a task id, so ("a", "b\nc") and ("a\nb", "c") never share an input.
  const digest = createHash("sha256").update(`${taskId}\n${idempotencyKey}`, "utf8").digest("hex");
  return `ev_${digest.slice(0, 16)}`;
}
