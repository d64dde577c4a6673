import { PublishError } from "@toolgate/bus";
import type { Logger } from "@toolgate/telemetry";
import { MongoClient, MongoNetworkError, type Db } from "mongodb";
import { describe, expect, it } from "vitest";
import { Availability, classifyFailure, DependencyUnavailableError, withDeadline, type NatsStatusSource } from "./outage.js";

describe("classifyFailure", () => {
  it("calls a publish JetStream did not acknowledge unavailable (NATS), wherever it sits in the cause chain", () => {
    const timeout = Object.assign(new Error("timeout"), { name: "TimeoutError" });
    const publish = new PublishError("publish of e1 was not acknowledged", { cause: timeout });
    expect(classifyFailure(publish)).toMatchObject({ kind: "unavailable", dependency: "nats" });
    expect(classifyFailure(new Error("submission failed", { cause: publish }))).toMatchObject({ kind: "unavailable", dependency: "nats" });
  });

  it("calls an event above the size limit a bug, not an outage", () => {
    expect(classifyFailure(new PublishError("too big", { retryable: false }))).toEqual({ kind: "bug" });
  });

  it("calls NATS connection errors unavailable by their class", () => {
    for (const name of ["ClosedConnectionError", "ConnectionError", "NoRespondersError", "TimeoutError"]) {
      expect(classifyFailure(Object.assign(new Error("x"), { name }))).toMatchObject({ kind: "unavailable", dependency: "nats", reason: name });
    }
  });

  it("calls the driver's network errors and a real server-selection failure unavailable (database)", async () => {
    expect(classifyFailure(new MongoNetworkError("connection reset"))).toMatchObject({ kind: "unavailable", dependency: "mongo" });
    // Nothing listens on port 1: the driver's own error, after its selection timeout.
    const client = new MongoClient("mongodb://127.0.0.1:1", { serverSelectionTimeoutMS: 100 });
    const error = await client
      .db("x")
      .command({ ping: 1 })
      .catch((e: unknown) => e);
    await client.close();
    expect(classifyFailure(error)).toMatchObject({ kind: "unavailable", dependency: "mongo", reason: "MongoServerSelectionError" });
  });

  it("calls socket errors unavailable and everything else a programmer error", () => {
    expect(classifyFailure(Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" }))).toMatchObject({ kind: "unavailable", dependency: "network" });
    expect(classifyFailure(new TypeError("cannot read properties of undefined"))).toEqual({ kind: "bug" });
    expect(classifyFailure(new RangeError("x", { cause: new SyntaxError("y") }))).toEqual({ kind: "bug" });
    expect(classifyFailure("a string")).toEqual({ kind: "bug" });
    expect(classifyFailure(undefined)).toEqual({ kind: "bug" });
    expect(classifyFailure(new DependencyUnavailableError("deadline", "slow"))).toMatchObject({ kind: "unavailable", dependency: "deadline" });
  });
});

describe("withDeadline", () => {
  it("passes the work's value through, and turns a late one into a typed unavailable error", async () => {
    expect(await withDeadline(Promise.resolve(7), 1_000, "x")).toBe(7);
    const started = Date.now();
    const late = await withDeadline(new Promise(() => undefined), 50, "submission").catch((e: unknown) => e);
    expect(late).toBeInstanceOf(DependencyUnavailableError);
    expect(classifyFailure(late)).toMatchObject({ kind: "unavailable", dependency: "deadline" });
    expect(Date.now() - started).toBeLessThan(1_000);
  });
});

describe("Availability", () => {
  it("follows NATS's disconnect and reconnect events and logs each transition once", async () => {
    const events: { type: string }[] = [];
    let push: () => void = () => undefined;
    const nats: NatsStatusSource = {
      isClosed: () => false,
      rtt: () => Promise.resolve(1),
      async *status() {
        for (;;) {
          while (events.length > 0) yield events.shift()!;
          await new Promise<void>((resolve) => (push = resolve));
        }
      },
    };
    const lines: string[] = [];
    const logger = {
      info: (_: unknown, msg: string) => lines.push(`info ${msg}`),
      warn: (_: unknown, msg: string) => lines.push(`warn ${msg}`),
    } as unknown as Logger;
    const availability = new Availability({ nats, db: {} as Db, logger, probeMs: 3_600_000, probeTimeoutMs: 100 });
    const emit = async (type: string) => {
      events.push({ type });
      push();
      await new Promise((resolve) => setImmediate(resolve));
    };
    expect(availability.available(["nats", "mongo"])).toBe(true);
    await emit("disconnect");
    await emit("disconnect");
    expect(availability.available(["nats"])).toBe(false);
    expect(availability.available(["mongo"])).toBe(true);
    expect(availability.unavailable()).toEqual([{ dependency: "nats", reason: "disconnected" }]);
    await emit("reconnect");
    expect(availability.available(["nats", "mongo"])).toBe(true);
    expect(lines).toEqual(["warn dependency unavailable: refusing new work with 503", "warn dependency available again"]);
    availability.close();
  });

  it("lets a request wait for a dependency to come back: served on its return, refused after the wait or when too many wait", async () => {
    const logger = { info: () => undefined, warn: () => undefined } as unknown as Logger;
    const nats: NatsStatusSource = { isClosed: () => false, rtt: () => Promise.resolve(1), status: async function* () {} };
    const availability = new Availability({ nats, db: {} as Db, logger, probeMs: 3_600_000, probeTimeoutMs: 100, maxWaiting: 2 });
    expect(await availability.whenAvailable(["mongo"], 10)).toBe(true);
    availability.mark("mongo", "paused");
    const first = availability.whenAvailable(["mongo", "nats"], 60_000);
    const second = availability.whenAvailable(["mongo"], 60_000);
    // The line is full: the third is refused at once, however long it would wait.
    expect(await availability.whenAvailable(["mongo"], 60_000)).toBe(false);
    expect(availability.waiting).toBe(2);
    // Another dependency's loss keeps the first waiting after the database is back.
    availability.mark("nats", "disconnected");
    availability.mark("mongo", undefined);
    expect(await second).toBe(true);
    expect(availability.waiting).toBe(1);
    availability.mark("nats", undefined);
    expect(await first).toBe(true);
    // A dependency that stays down: refused when the wait runs out, and out of the line.
    availability.mark("nats", "disconnected");
    expect(await availability.whenAvailable(["nats"], 20)).toBe(false);
    expect(availability.waiting).toBe(0);
    availability.close();
  });
});
