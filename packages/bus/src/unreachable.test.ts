import { describe, expect, it } from "vitest";
import { unreachableDependency } from "./unreachable.js";

const named = (name: string, message = name, extra: object = {}) => Object.assign(new Error(message), { name }, extra);

describe("unreachableDependency", () => {
  it("recognizes the MongoDB driver's outage errors by name, subclasses included", () => {
    for (const name of ["MongoServerSelectionError", "MongoNetworkTimeoutError", "MongoPoolClearedError", "MongoWaitQueueTimeoutError"]) {
      expect(unreachableDependency(named(name))).toEqual({ dependency: "mongo", reason: name });
    }
  });

  it("recognizes a bulk write that failed on its connection, not one that failed on a document", () => {
    expect(unreachableDependency(named("MongoBulkWriteError", "connection 12 to 127.0.0.1:27117 closed", { writeErrors: [] }))).toEqual({
      dependency: "mongo",
      reason: "MongoBulkWriteError",
    });
    const cleared = 'Connection pool for 127.0.0.1:42225 was cleared because another operation failed with: "read ECONNRESET"';
    expect(unreachableDependency(named("MongoBulkWriteError", cleared, { writeErrors: [] }))).toMatchObject({ dependency: "mongo" });
    expect(unreachableDependency(named("MongoBulkWriteError", "E11000 duplicate key", { writeErrors: [{ index: 0, code: 11000 }] }))).toBeUndefined();
    // A command the server refused (a document it cannot store) is not an outage, whatever its message says.
    expect(unreachableDependency(named("MongoBulkWriteError", "invalid key: connection reset", { writeErrors: [], code: 2 }))).toBeUndefined();
    expect(unreachableDependency(named("MongoBulkWriteError", "waiting for replication timed out", { err: { code: 64 } }))).toBeUndefined();
  });

  it("walks the cause chain to a NATS error, an unacknowledged publish or a socket error", () => {
    expect(unreachableDependency(new Error("handler failed", { cause: named("TimeoutError") }))).toEqual({ dependency: "nats", reason: "TimeoutError" });
    expect(unreachableDependency(Object.assign(new Error("not acknowledged"), { code: "PUBLISH_FAILED", retryable: true }))).toEqual({
      dependency: "nats",
      reason: "publish not acknowledged",
    });
    expect(unreachableDependency(Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" }))).toEqual({ dependency: "network", reason: "ECONNRESET" });
  });

  it("says nothing about a bug, an oversized event or a value that is not an error", () => {
    expect(unreachableDependency(new TypeError("x is undefined"))).toBeUndefined();
    expect(unreachableDependency(Object.assign(new Error("too large"), { code: "PUBLISH_FAILED", retryable: false }))).toBeUndefined();
    expect(unreachableDependency(undefined)).toBeUndefined();
    expect(unreachableDependency("ECONNRESET")).toBeUndefined();
  });
});
