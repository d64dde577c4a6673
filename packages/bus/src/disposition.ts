import { unprocessableValue } from "./unprocessable.js";
import { unreachableDependency } from "./unreachable.js";

/**
 * What a handler decided about one delivered message. Retry intent lives in the type: `retry` becomes a
 * JetStream `nak(delay)`, `terminate` a `term()`, `ack` an `ack()`.
 */
export type Disposition = { kind: "ack" } | { kind: "retry"; delayMs: number; reason: string } | { kind: "terminate"; reason: string };

export const ACK: Disposition = { kind: "ack" };

/** Ask for redelivery after `delayMs` (the message counts one more delivery). */
export function retryLater(reason: string, delayMs: number): Disposition {
  return { kind: "retry", reason, delayMs };
}

/** Never deliver this message again. */
export function terminate(reason: string): Disposition {
  return { kind: "terminate", reason };
}

/** The JetStream acknowledgement to send. */
export type AckAction = { op: "ack" } | { op: "nak"; delayMs: number } | { op: "term"; reason: string };

export interface DeliveryAttempt {
  /** 1 for the first delivery. */
  deliveryCount: number;
  maxDeliver: number;
}

const BASE_DELAY_MS = 250;
const MAX_DELAY_MS = 30_000;
/**
 * A delivery that failed because a dependency was unreachable is retried at least this often: the outage's end
 * should resume the work within a second, not after a backoff that grew while it lasted.
 */
export const UNREACHABLE_RETRY_MS = 1_000;

/** Exponential redelivery delay for the n-th failed delivery (1-based), capped at 30 s. */
export function backoffDelay(deliveryCount: number): number {
  return Math.min(BASE_DELAY_MS * 2 ** Math.max(0, deliveryCount - 1), MAX_DELAY_MS);
}

/**
 * Maps a handler's outcome to the acknowledgement. A thrown error that says the message's data can never be
 * processed (see `unprocessableValue`: a value the driver cannot encode or the database refuses) terminates it
 * at once. Any other thrown error is transient: redelivered with backoff, which stops growing at
 * {@link UNREACHABLE_RETRY_MS} when the error says a dependency was unreachable. Every other error counts against
 * the consumer's delivery budget (`maxDeliver`, unbounded when not positive): on the last delivery it terminates
 * the message instead. Outages do not spend the budget on purpose — they consume deliveries at one a second — so
 * the server's own bound is far higher (see `serverMaxDeliver`).
 */
export function ackAction(outcome: { disposition: Disposition } | { error: unknown }, attempt: DeliveryAttempt): AckAction {
  if ("error" in outcome) {
    // Checked first: a refused value is never an outage, whatever else its error chain says.
    const unprocessable = unprocessableValue(outcome.error);
    if (unprocessable) return { op: "term", reason: `the handler cannot process this message: ${unprocessable.reason}` };
    const backoff = backoffDelay(attempt.deliveryCount);
    if (unreachableDependency(outcome.error)) return { op: "nak", delayMs: Math.min(backoff, UNREACHABLE_RETRY_MS) };
    if (attempt.maxDeliver > 0 && attempt.deliveryCount >= attempt.maxDeliver) {
      return { op: "term", reason: `the handler failed on all ${attempt.maxDeliver} deliveries` };
    }
    return { op: "nak", delayMs: backoff };
  }
  const d = outcome.disposition;
  switch (d.kind) {
    case "ack":
      return { op: "ack" };
    case "terminate":
      return { op: "term", reason: d.reason };
    case "retry":
      return { op: "nak", delayMs: nakDelay(d.delayMs) };
  }
}

// The server reads the NAK delay as integer nanoseconds and silently redelivers at once when it cannot parse it
// (a fractional or non-finite value), which would turn "retry later" into a hot loop.
function nakDelay(delayMs: number): number {
  if (Number.isFinite(delayMs)) return Math.max(0, Math.round(delayMs));
  return delayMs > 0 ? MAX_DELAY_MS : 0;
}

/**
 * Deliveries the server allows a message of a consumer whose handlers get `maxDeliver` failures: an hour of
 * outage retries beyond that (a message that kills its handler's process also ends here), or unbounded.
 */
export function serverMaxDeliver(maxDeliver: number): number {
  return maxDeliver > 0 ? maxDeliver + 3_600 : -1;
}
