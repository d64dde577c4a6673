import { describe, expect, it } from "vitest";
import { ACK, ackAction, backoffDelay, retryLater, serverMaxDeliver, terminate, UNREACHABLE_RETRY_MS } from "./disposition.js";

const first = { deliveryCount: 1, maxDeliver: 5 };

describe("ackAction", () => {
  it("acks an ack", () => {
    expect(ackAction({ disposition: ACK }, first)).toEqual({ op: "ack" });
  });

  it("terminates a terminate, keeping the reason", () => {
    expect(ackAction({ disposition: terminate("poison") }, first)).toEqual({ op: "term", reason: "poison" });
  });

  it("naks a retry with the handler's delay", () => {
    expect(ackAction({ disposition: retryLater("busy", 1_500) }, first)).toEqual({ op: "nak", delayMs: 1_500 });
    // The handler's delay wins over the default backoff, whatever the delivery count.
    expect(ackAction({ disposition: retryLater("busy", 40) }, { deliveryCount: 4, maxDeliver: 5 })).toEqual({ op: "nak", delayMs: 40 });
  });

  it("never naks with a negative, fractional or non-finite delay", () => {
    expect(ackAction({ disposition: retryLater("clock skew", -20) }, first)).toEqual({ op: "nak", delayMs: 0 });
    expect(ackAction({ disposition: retryLater("math", 12.7) }, first)).toEqual({ op: "nak", delayMs: 13 });
    expect(ackAction({ disposition: retryLater("math", Number.NaN) }, first)).toEqual({ op: "nak", delayMs: 0 });
    expect(ackAction({ disposition: retryLater("math", Number.POSITIVE_INFINITY) }, first)).toEqual({
      op: "nak",
      delayMs: backoffDelay(Number.MAX_SAFE_INTEGER),
    });
  });

  it("treats a thrown error as transient and naks with backoff for the delivery count", () => {
    const error = new Error("store unreachable");
    expect(ackAction({ error }, first)).toEqual({ op: "nak", delayMs: 250 });
    expect(ackAction({ error }, { deliveryCount: 3, maxDeliver: 5 })).toEqual({ op: "nak", delayMs: 1_000 });
    // Even a thrown value that is not an Error, or undefined, is a transient failure.
    expect(ackAction({ error: undefined }, first)).toEqual({ op: "nak", delayMs: 250 });
  });
});

describe("ackAction for a handler that threw", () => {
  const outage = Object.assign(new Error("connection 7 to 127.0.0.1:27017 closed"), { name: "MongoNetworkError" });

  it("retries an unreachable dependency every second at most, however long the outage has lasted", () => {
    expect(ackAction({ error: outage }, { deliveryCount: 1, maxDeliver: 20 })).toEqual({ op: "nak", delayMs: 250 });
    expect(ackAction({ error: outage }, { deliveryCount: 6, maxDeliver: 20 })).toEqual({ op: "nak", delayMs: UNREACHABLE_RETRY_MS });
    // Past the budget for bugs: an outage never terminates a message.
    expect(ackAction({ error: new Error("publish failed", { cause: outage }) }, { deliveryCount: 500, maxDeliver: 20 })).toEqual({
      op: "nak",
      delayMs: UNREACHABLE_RETRY_MS,
    });
  });

  it("terminates a message whose handler fails for another reason on its last delivery", () => {
    const bug = new TypeError("cannot read properties of undefined");
    expect(ackAction({ error: bug }, { deliveryCount: 19, maxDeliver: 20 })).toEqual({ op: "nak", delayMs: 30_000 });
    expect(ackAction({ error: bug }, { deliveryCount: 20, maxDeliver: 20 })).toEqual({ op: "term", reason: "the handler failed on all 20 deliveries" });
    // An unbounded consumer (the executor bounds its own attempts) keeps retrying.
    expect(ackAction({ error: bug }, { deliveryCount: 400, maxDeliver: -1 })).toEqual({ op: "nak", delayMs: 30_000 });
  });
});

describe("serverMaxDeliver", () => {
  it("leaves an hour of outage retries beyond the handler budget, and keeps unbounded unbounded", () => {
    expect(serverMaxDeliver(20)).toBe(3_620);
    expect(serverMaxDeliver(-1)).toBe(-1);
  });
});

describe("backoffDelay", () => {
  it("doubles from 250 ms per failed delivery", () => {
    expect([1, 2, 3, 4, 5, 6, 7, 8].map(backoffDelay)).toEqual([250, 500, 1_000, 2_000, 4_000, 8_000, 16_000, 30_000]);
  });

  it("is capped at 30 s however many deliveries failed", () => {
    expect(backoffDelay(9)).toBe(30_000);
    expect(backoffDelay(10_000)).toBe(30_000);
  });

  it("treats a count below 1 as the first delivery", () => {
    expect(backoffDelay(0)).toBe(250);
    expect(backoffDelay(-3)).toBe(250);
  });
});

describe("ackAction for a handler that failed on the message's own data", () => {
  const named = (name: string, message: string, extra: object = {}) => Object.assign(new Error(message), { name }, extra);

  it("terminates at once a value the driver cannot encode or the database refuses, on any delivery", () => {
    const refused = [
      named("BSONError", "key a\u0000b must not contain null bytes"),
      // FerretDB on PostgreSQL, for a string holding U+0000.
      named("MongoBulkWriteError", "ERROR: unsupported Unicode escape sequence (SQLSTATE 22P05)", { code: 1, writeErrors: [] }),
      named("MongoServerError", "ERROR: unsupported Unicode escape sequence (SQLSTATE 22P05)", { code: 1 }),
      named("MongoBulkWriteError", 'invalid key: "$x"', { code: 2, writeErrors: [{ index: 0, code: 2 }] }),
      named("MongoServerError", "Document failed validation", { code: 121 }),
      new Error("attach failed", { cause: named("BSONError", "cannot encode") }),
    ];
    for (const error of refused) {
      expect(ackAction({ error }, first)).toMatchObject({ op: "term", reason: expect.stringContaining("cannot process this message") });
    }
  });

  it("does not take an outage, a duplicate key or another server failure for a refused value", () => {
    expect(ackAction({ error: named("MongoServerSelectionError", "Server selection timed out") }, first)).toEqual({ op: "nak", delayMs: 250 });
    expect(ackAction({ error: named("MongoBulkWriteError", "E11000", { code: 11000, writeErrors: [{ index: 0, code: 11000 }] }) }, first)).toEqual({
      op: "nak",
      delayMs: 250,
    });
    // FerretDB's InternalError for a backend that is not answering is no data exception (SQLSTATE class 08).
    expect(ackAction({ error: named("MongoServerError", "connection failure (SQLSTATE 08006)", { code: 1 }) }, first)).toEqual({ op: "nak", delayMs: 250 });
    // A message that merely mentions a SQLSTATE, without the server's code, is not the server's verdict.
    expect(ackAction({ error: new Error("(SQLSTATE 22P05)") }, first)).toEqual({ op: "nak", delayMs: 250 });
  });
});
