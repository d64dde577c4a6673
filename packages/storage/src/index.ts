export { InsertBatcher, DUPLICATE_KEY, type InsertOutcome, type InsertBatcherOptions } from "./insert-batcher.js";
export {
  MongoIdempotencyStore,
  type IdempotencyStore,
  type ClaimOutcome,
  type RetriedAttempt,
  type ClaimRequest,
  type IdempotencyRecord,
  type IdempotencyStep,
} from "./idempotency-store.js";
export {
  MongoAuditStore,
  recordHash,
  type AuditStore,
  type AuditStoreOptions,
  type AuditRecord,
  type RejectedMessage,
  type ChainVerification,
  type LedgerVerification,
} from "./audit-store.js";
export { connectMongo, type MongoConnectionOptions } from "./mongo-connection.js";
export { MONGO_GUARDS, WriteConcernError, writeConcernProblem, type MongoGuard, type MongoTopology } from "./write-concern-guard.js";
export {
  MongoRequestIdempotencyStore,
  type RequestIdempotencyStore,
  type RequestKeyRecord,
  type RequestKeyState,
  type RequestKeyClaim,
  type RequestKeyClaimRequest,
} from "./request-idempotency-store.js";
