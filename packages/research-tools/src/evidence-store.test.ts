import { describe, expect, it } from "vitest";
import { evidenceId } from "./index.js";

describe("evidenceId", () => {
  it("is deterministic per (task, key) and shaped ev_ + 16 hex", () => {
    expect(evidenceId("task_1", "key-a")).toBe(evidenceId("task_1", "key-a"));
    expect(evidenceId("task_1", "key-a")).toMatch(/^ev_[0-9a-f]{16}$/);
  });

  it("differs when the task or the key differs, including for shifted boundaries", () => {
    const ids = new Set([
      evidenceId("task_1", "key-a"),
      evidenceId("task_2", "key-a"),
      evidenceId("task_1", "key-b"),
      evidenceId("ab", "c"),
      evidenceId("a", "bc"),
    ]);
    expect(ids.size).toBe(5);
  });
});
