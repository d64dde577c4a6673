import { describe, expect, it } from "vitest";
import { ACK, ackAction, backoffDelay, retryLater, terminate } from "./disposition.js";

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
