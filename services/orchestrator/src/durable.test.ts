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

describe("Durable.lazy", () => {
  it("writes nothing until it is begun or ensured, then lands once", async () => {
    const write = vi.fn(() => Promise.resolve());
    const d = Durable.lazy(write);
    expect(write).not.toHaveBeenCalled();
    d.begin();
    d.begin();
    await d.ensure();
    expect(write).toHaveBeenCalledTimes(1);
    expect(await d.settled()).toBe(true);
  });

  it("is started by ensure alone", async () => {
    const write = vi.fn(() => Promise.resolve());
    await Durable.lazy(write).ensure();
    expect(write).toHaveBeenCalledTimes(1);
  });

  it("never writes once cancelled before it started, and ensure then resolves at once", async () => {
    const write = vi.fn(() => Promise.resolve());
    const d = Durable.lazy(write);
    expect(d.cancel()).toBe(true);
    d.begin();
    await d.ensure();
    expect(write).not.toHaveBeenCalled();
  });

  it("cannot be cancelled once started: the write lands and ensure retries a failed one", async () => {
    let fail = 1;
    const write = vi.fn(() => (fail-- > 0 ? Promise.reject(new Error("store down")) : Promise.resolve()));
    const d = Durable.lazy(write);
    d.begin();
    expect(d.cancel()).toBe(false);
    expect(await d.settled()).toBe(false);
    await d.ensure();
    expect(write).toHaveBeenCalledTimes(2);
  });

  it("a started or already durable write is never cancelled", () => {
    expect(Durable.start(() => Promise.resolve()).cancel()).toBe(false);
    expect(Durable.done().cancel()).toBe(false);
  });
});
