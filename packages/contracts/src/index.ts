export { ERROR_CODES, ErrorCodeSchema, isRetryableByDefault, type ErrorCode } from "./error-codes.js";
export {
  JsonValueSchema,
  ViolationSchema,
  ToolErrorSchema,
  SuccessResultSchema,
  FailureResultSchema,
  ResultEnvelopeSchema,
  success,
  failure,
  type JsonValue,
  type Violation,
  type ToolError,
  type ResultEnvelope,
  type SuccessResult,
  type FailureResult,
} from "./result-envelope.js";
export { CallIdSchema, RunIdSchema, callIdFloor, newCallId, newRunId, idTime, isSubjectSafe, type CallId, type RunId } from "./ids.js";
export { PrincipalSchema, type Principal } from "./principal.js";
export { canonicalJson, canonicalHash, sha256 } from "./hashing.js";
export {
  CALL_EVENT_TYPES,
  TERMINAL_CALL_EVENT_TYPES,
  RUN_EVENT_TYPES,
  subjectCatalogue,
  type CallEventType,
  type TerminalCallEventType,
  type RunEventType,
  type SubjectCatalogue,
} from "./subjects.js";
export {
  ServiceNameSchema,
  HashSchema,
  EventIdSchema,
  ToolRefSchema,
  RunContextSchema,
  DecisionSchema,
  CallEventSchema,
  RunEventSchema,
  ToolgateEventSchema,
  MAX_ARGUMENTS_JSON_BYTES,
  eventId,
  refusalEventId,
  BUDGET_STOP_REASONS,
  RunStopReasonSchema,
  isBudgetStop,
  type RunStopReason,
  type ServiceName,
  type ToolRef,
  type RunContext,
  type Decision,
  type CallEvent,
  type RunEvent,
  type ToolgateEvent,
  type CallEventOf,
  type RunEventOf,
} from "./events.js";
export { CALL_EVENT_OWNERS, REFUSAL_REPORTERS, RUN_EVENT_OWNERS } from "./event-owners.js";
export {
  EVENT_SIGNATURE_HEADER,
  eventOwners,
  eventSigner,
  eventTrust,
  messageDigest,
  parseTrustedKey,
  signatureKeyId,
  type EventSigner,
  type EventTrust,
  type SignatureFacts,
  type SignatureProblem,
} from "./event-signature.js";
export { parseEvent, MAX_EVENT_DEPTH, type EventRejection, type ParsedEvent } from "./parse-event.js";
export { jsonDepth, utf8Length } from "./json-limits.js";
export { decisionSigner, decisionVerifier, keyIdOf, type DecisionSigner, type DecisionVerifier } from "./decision-signature.js";
export { nextCallEvent, originOf, runEvent, type CallEventOrigin } from "./event-builders.js";
export {
  unsafeText,
  findUnsafeText,
  describeUnsafeText,
  printablePointer,
  type UnsafeText,
  type UnsafeTextAt,
  type UnsafeTextReason,
  type TextRole,
} from "./unsafe-text.js";
