import { describe, expect, it, vi } from "vitest";
import { Durable } from "./durable.js";

describe("Durable", () => {
  it("starts a write at once and lands it once, however often it is ensured", async () => {
    const write = vi.fn(() => Promise.resolve());
    const d = Durable.start(write);
    expect(write).toHaveBeenCalledTimes(1);
    await d.ensure();
    await d.ensure();
    expect(await d.settled()).toBe(true);
    expect(write).toHaveBeenCalledTimes(1);
  });

  it("retries a failed write on ensure, and throws when the retry fails too", async () => {
    let fail = 2;
    const write = vi.fn(() => (fail-- > 0 ? Promise.reject(new Error("store down")) : Promise.resolve()));
    const d = Durable.start(write);
    expect(await d.settled()).toBe(false);
    await expect(d.ensure()).rejects.toThrow("store down");
    await d.ensure();
    expect(await d.settled()).toBe(true);
    expect(write).toHaveBeenCalledTimes(3);
  });

  it("knows something already durable without writing", async () => {
    expect(await Durable.done().settled()).toBe(true);
    await Durable.done().ensure();
  });
});
