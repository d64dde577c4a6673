/** Why an unknown outcome is unknown: the tool ran out of time, lost its connection, or stopped part-way. */
export type UncertainCause = "timeout" | "connection_lost" | "interrupted";

/** What an exception thrown by a tool says about its side effect. */
export type ThrownFailure =
  /** Nothing can have happened (a tool that does not write, or a failure known to precede any effect). */
  | { kind: "definite" }
  /** The effect may or may not have happened: report OUTCOME_UNKNOWN and reconcile, never a definite failure. */
  | { kind: "uncertain"; cause: UncertainCause };

/**
 * A failure known to precede any effect: raised by the executor around a tool's object and state layers, or
 * by a tool itself. Any error carrying `applied: false` (on itself or in its `cause` chain) counts the same,
 * so a tool can say "not applied" with its own error classes.
 */
export class NotAppliedError extends Error {
  readonly code = "NOT_APPLIED";
  readonly applied = false;

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "NotAppliedError";
  }
}

/** System, undici and driver codes of a connection that broke or could not be used. */
const CONNECTION_CODES = new Set([
  "ECONNRESET",
  "EPIPE",
  "ECONNABORTED",
  "ECONNREFUSED",
  "ENOTCONN",
  "ENETRESET",
  "ENETDOWN",
  "ENETUNREACH",
  "EHOSTUNREACH",
  "EHOSTDOWN",
  "ENOTFOUND",
  "EAI_AGAIN",
  "UND_ERR_SOCKET",
  "UND_ERR_CLOSED",
]);
const TIMEOUT_CODES = new Set(["ETIMEDOUT", "ESOCKETTIMEDOUT", "UND_ERR_CONNECT_TIMEOUT", "UND_ERR_HEADERS_TIMEOUT", "UND_ERR_BODY_TIMEOUT"]);
/** Error names (MongoDB driver, DOM) that mean the same when no code says it. */
const CONNECTION_NAMES = new Set(["MongoNetworkError", "MongoServerSelectionError", "MongoTopologyClosedError", "MongoPoolClearedError"]);
const TIMEOUT_NAMES = new Set(["TimeoutError", "MongoNetworkTimeoutError", "MongoOperationTimeoutError", "MongoWaitQueueTimeoutError"]);
/** Labels the MongoDB driver puts on an error whose write may or may not have been applied. */
const UNCERTAIN_LABELS = new Set(["RetryableWriteError", "NetworkError"]);

/** The error and its causes, outermost first (bounded: a cause chain can be cyclic). */
function chain(error: unknown): object[] {
  const links: object[] = [];
  for (let e: unknown = error; typeof e === "object" && e !== null && links.length < 8 && !links.includes(e); e = (e as { cause?: unknown }).cause) {
    links.push(e);
  }
  return links;
}

function labelsOf(link: object): string[] {
  const labels = (link as { errorLabels?: unknown; errorLabelSet?: unknown }).errorLabels ?? (link as { errorLabelSet?: unknown }).errorLabelSet;
  if (labels instanceof Set || Array.isArray(labels)) return [...(labels as Iterable<unknown>)].filter((l): l is string => typeof l === "string");
  return [];
}

/**
 * Classifies an exception thrown by a tool. A tool that does not write fails definitely. For a writing tool
 * only a failure that says it came before any effect (`applied: false` on it or its causes) is definite;
 * everything else is uncertain — a reset connection, a timeout, a driver network error, or any other throw,
 * since an exception alone cannot tell whether the request had already been sent. Pure; never throws.
 */
export function classifyThrown(error: unknown, writes: boolean): ThrownFailure {
  if (!writes) return { kind: "definite" };
  const links = chain(error);
  if (links.some((link) => (link as { applied?: unknown }).applied === false)) return { kind: "definite" };
  for (const link of links) {
    const code = (link as { code?: unknown }).code;
    const name = (link as { name?: unknown }).name;
    if ((typeof code === "string" && TIMEOUT_CODES.has(code)) || (typeof name === "string" && TIMEOUT_NAMES.has(name)))
      return { kind: "uncertain", cause: "timeout" };
    if ((typeof code === "string" && CONNECTION_CODES.has(code)) || (typeof name === "string" && CONNECTION_NAMES.has(name))) {
      return { kind: "uncertain", cause: "connection_lost" };
    }
    if (labelsOf(link).some((label) => UNCERTAIN_LABELS.has(label))) return { kind: "uncertain", cause: "connection_lost" };
  }
  return { kind: "uncertain", cause: "interrupted" };
}
