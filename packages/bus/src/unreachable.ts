/** A failure that says a dependency could not be reached: retry soon, it is nobody's bug. */
export interface Unreachable {
  dependency: "nats" | "mongo" | "network";
  reason: string;
}

/**
 * NATS client errors that mean the server is down, unreachable or not answering. By class name: the bus's users
 * do not depend on the client's error classes.
 */
const NATS_UNREACHABLE = new Set(["TimeoutError", "ClosedConnectionError", "ConnectionError", "NoRespondersError", "RequestError", "DrainingConnectionError"]);
/** MongoDB driver errors that mean the server is down or unreachable (subclasses by their own names). */
const MONGO_UNREACHABLE = new Set([
  "MongoServerSelectionError",
  "MongoNetworkError",
  "MongoNetworkTimeoutError",
  "MongoTopologyClosedError",
  "MongoNotConnectedError",
  "MongoWaitQueueTimeoutError",
  "MongoPoolClearedError",
]);
/** Socket errors that mean the far side is down or unreachable, whoever raised them. */
const NETWORK_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EPIPE", "EHOSTUNREACH", "ENETUNREACH", "ENOTCONN"]);

/**
 * Which dependency `error` says is unreachable, walking its `cause` chain; undefined for any other failure.
 * Recognized: a publish JetStream did not acknowledge (`PUBLISH_FAILED`, retryable), a NATS timeout or closed
 * connection, a MongoDB server-selection, network, pool or topology error, a bulk write that failed on the
 * connection or its pool rather than on a document or in the server (the driver wraps those without
 * per-document errors or a server error code), and a socket
 * error. Never throws.
 */
export function unreachableDependency(error: unknown): Unreachable | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 8 && current !== null && typeof current === "object"; depth++) {
    const e = current as { name?: unknown; code?: unknown; retryable?: unknown; cause?: unknown; writeErrors?: unknown; err?: unknown };
    const name = typeof e.name === "string" ? e.name : "";
    if (MONGO_UNREACHABLE.has(name)) return { dependency: "mongo", reason: name };
    if (
      name === "MongoBulkWriteError" &&
      isEmpty(e.writeErrors) &&
      e.err === undefined &&
      typeof e.code !== "number" &&
      isConnectionMessage(current as Error)
    ) {
      return { dependency: "mongo", reason: name };
    }
    if (e.code === "PUBLISH_FAILED") return e.retryable === false ? undefined : { dependency: "nats", reason: "publish not acknowledged" };
    if (NATS_UNREACHABLE.has(name)) return { dependency: "nats", reason: name };
    // A bare socket error does not say whose socket it was.
    if (typeof e.code === "string" && NETWORK_CODES.has(e.code)) return { dependency: "network", reason: e.code };
    current = e.cause;
  }
  return undefined;
}

function isEmpty(list: unknown): boolean {
  return list === undefined || (Array.isArray(list) && list.length === 0);
}

/**
 * The driver's messages for a connection or pool that failed under an operation ("connection 7 to … closed",
 * "Connection pool for … was cleared because another operation failed with: read ECONNRESET").
 */
function isConnectionMessage(error: Error): boolean {
  return /\b(connection|pool|socket)\b.*\b(closed|cleared|timed out|reset)\b|\bE(CONNRESET|CONNREFUSED|PIPE|TIMEDOUT)\b/i.test(error.message ?? "");
}
