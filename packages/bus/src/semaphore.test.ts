import { describe, expect, it } from "vitest";
import { Semaphore } from "./semaphore.js";

/** Lets every already-resolved promise continuation run. */
async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await Promise.resolve();
}

describe("Semaphore", () => {
  it("refuses a non-positive or fractional number of permits", () => {
    for (const permits of [0, -1, 1.5, Number.NaN]) expect(() => new Semaphore(permits)).toThrow(RangeError);
  });

  it("grants up to its permits at once and makes the next caller wait", async () => {
    const semaphore = new Semaphore(3);
    const granted: number[] = [];
    for (let i = 0; i < 5; i++) void semaphore.acquire().then(() => granted.push(i));
    await settle();
    expect(granted).toEqual([0, 1, 2]);
    semaphore.release();
    await settle();
    expect(granted).toEqual([0, 1, 2, 3]);
  });

  it("grants waiting callers in request order", async () => {
    const semaphore = new Semaphore(1);
    await semaphore.acquire();
    const granted: number[] = [];
    const waiters = Array.from({ length: 6 }, (_, i) => semaphore.acquire().then(() => granted.push(i)));
    await settle();
    expect(granted).toEqual([]);
    for (let i = 0; i < 6; i++) {
      semaphore.release();
      await settle();
      expect(granted).toEqual(Array.from({ length: i + 1 }, (_, j) => j));
    }
    await Promise.all(waiters);
  });

  it("hands a released permit to a waiter instead of a newcomer", async () => {
    const semaphore = new Semaphore(1);
    await semaphore.acquire();
    const order: string[] = [];
    void semaphore.acquire().then(() => order.push("waiter"));
    semaphore.release();
    void semaphore.acquire().then(() => order.push("newcomer"));
    await settle();
    expect(order).toEqual(["waiter"]);
    semaphore.release();
    await settle();
    expect(order).toEqual(["waiter", "newcomer"]);
  });

  it("never has more holders than permits under churn", async () => {
    const semaphore = new Semaphore(4);
    let running = 0;
    let peak = 0;
    await Promise.all(
      Array.from({ length: 200 }, async (_, i) => {
        await semaphore.acquire();
        running += 1;
        peak = Math.max(peak, running);
        for (let j = 0; j < i % 7; j++) await Promise.resolve();
        running -= 1;
        semaphore.release();
      }),
    );
    expect(peak).toBe(4);
    expect(running).toBe(0);
  });

  it("refuses a release without a held permit, which would raise the limit", async () => {
    const semaphore = new Semaphore(2);
    expect(() => semaphore.release()).toThrow(Error);
    await semaphore.acquire();
    semaphore.release();
    expect(() => semaphore.release()).toThrow(Error);
    // The limit is still 2.
    let granted = 0;
    for (let i = 0; i < 3; i++) void semaphore.acquire().then(() => (granted += 1));
    await settle();
    expect(granted).toBe(2);
  });
});
