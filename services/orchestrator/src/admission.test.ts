import { describe, expect, it, vi } from "vitest";
import { Admission } from "./admission.js";

function deferred(): { promise: Promise<void>; resolve: () => void; reject: (e: Error) => void } {
  let resolve!: () => void;
  let reject!: (e: Error) => void;
  const promise = new Promise<void>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
}
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

describe("Admission", () => {
  it("refuses beyond its limit and takes requests again once a place is given back", () => {
    const admission = new Admission(2);
    const first = admission.enter()!;
    expect(admission.enter()).toBeDefined();
    expect(admission.enter()).toBeUndefined();
    first.release();
    first.release();
    expect(admission.inFlight).toBe(1);
    expect(admission.enter()).toBeDefined();
    expect(admission.enter()).toBeUndefined();
  });

  it("keeps a place while work the request started goes on after the request ended", async () => {
    const admission = new Admission(1);
    const ticket = admission.enter()!;
    const claim = deferred();
    const submission = deferred();
    ticket.hold(claim.promise);
    ticket.hold(submission.promise);
    ticket.release();
    claim.resolve();
    await settle();
    expect(admission.enter()).toBeUndefined();
    submission.reject(new Error("the store went away"));
    await settle();
    expect(admission.inFlight).toBe(0);
    expect(admission.enter()).toBeDefined();
  });

  it("keeps a place until the request stops starting work, even when its work has settled", async () => {
    const admission = new Admission(1);
    const ticket = admission.enter()!;
    ticket.hold(Promise.resolve());
    await settle();
    expect(admission.inFlight).toBe(1);
    ticket.release();
    expect(admission.inFlight).toBe(0);
  });

  it("lets waiting requests in first come, first served, as places are given back", async () => {
    const admission = new Admission(1);
    const first = (await admission.admit(1_000))!;
    const order: string[] = [];
    const second = admission.admit(1_000).then((t) => (order.push("second"), t));
    const third = admission.admit(1_000).then((t) => (order.push("third"), t));
    // Nobody jumps the line: a request arriving now waits behind the two.
    expect(admission.enter()).toBeUndefined();
    expect(admission.waiting).toBe(2);
    first.release();
    (await second)!.release();
    await third;
    expect(order).toEqual(["second", "third"]);
    expect([admission.inFlight, admission.waiting]).toEqual([1, 0]);
  });

  it("refuses at once when the line is full, and a request whose wait ran out leaves it", async () => {
    vi.useFakeTimers();
    try {
      const admission = new Admission(1, { maxWaiting: 1 });
      const first = (await admission.admit(1_000))!;
      const waited = admission.admit(1_000);
      await expect(admission.admit(1_000)).resolves.toBeUndefined();
      vi.advanceTimersByTime(1_000);
      await expect(waited).resolves.toBeUndefined();
      expect(admission.waiting).toBe(0);
      // The place given back is free again, not handed to the request that left.
      first.release();
      expect(admission.inFlight).toBe(0);
      expect(admission.enter()).toBeDefined();
    } finally {
      vi.useRealTimers();
    }
  });

  it("rejects a limit that admits nothing", () => {
    expect(() => new Admission(0)).toThrow(RangeError);
  });
});

describe("Admission with work that hangs", () => {
  it("gives the place back after the hold limit even when the work never settles", () => {
    vi.useFakeTimers();
    try {
      const admission = new Admission(1);
      const ticket = admission.enter()!;
      ticket.hold(new Promise(() => undefined), 20_000);
      ticket.release();
      vi.advanceTimersByTime(19_999);
      expect(admission.enter()).toBeUndefined();
      vi.advanceTimersByTime(1);
      expect(admission.inFlight).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });
});
