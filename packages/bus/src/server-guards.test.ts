import { describe, expect, it } from "vitest";
import { compareVersions, NatsVersionError } from "./server-guards.js";

describe("compareVersions", () => {
  it("orders releases and puts a pre-release before its release", () => {
    expect(compareVersions("2.12.3", "2.12.3")).toBe(0);
    expect(compareVersions("2.12.2", "2.12.3")).toBeLessThan(0);
    expect(compareVersions("2.15.2", "2.12.3")).toBeGreaterThan(0);
    expect(compareVersions("2.9.10", "2.10.0")).toBeLessThan(0);
    expect(compareVersions("2.12.3-RC.1", "2.12.3")).toBeLessThan(0);
    expect(compareVersions("v2.12.4", "2.12.3")).toBeGreaterThan(0);
  });

  it("treats an unparsable version as older than any release", () => {
    expect(compareVersions("unknown", "2.10.0")).toBeLessThan(0);
    expect(new NatsVersionError("s", "unknown").overridable).toBe(false);
  });
});
