import { describe, expect, it } from "vitest";
import { callStatus, describeRun, startRunBody, type RunView } from "./run-view.js";

describe("startRunBody", () => {
  it("names the task in the input the model reads, and puts it in the run's context", () => {
    expect(startRunBody("scripted:c04", "research", "task_c04")).toEqual({
      model: "scripted:c04",
      input: "task_id=task_c04: research",
      context: { task_id: "task_c04" },
    });
    expect(startRunBody("scripted:c04", "", "task_c04").input).toBe("task_id=task_c04:");
  });

  it("leaves an input alone that names the task already, or when no task is given", () => {
    expect(startRunBody("m", "task_id=task_c04: research", "task_c04").input).toBe("task_id=task_c04: research");
    expect(startRunBody("m", "Task ID: task_c04, research", "task_c04").input).toBe("Task ID: task_c04, research");
    expect(startRunBody("m", "research", undefined)).toEqual({ model: "m", input: "research", context: {} });
  });

  it("does not take another task whose id starts with this one's for this one", () => {
    expect(startRunBody("m", "task_id=task_c04b: research", "task_c04").input).toBe("task_id=task_c04: task_id=task_c04b: research");
  });
});

describe("describeRun", () => {
  const run: RunView = {
    run_id: "run_1",
    status: "running",
    model: "scripted:c04",
    calls: [
      { call_id: "call_a", provider_call_id: "call_01", tool: "fetch_document", status: "completed", result: { ok: true } },
      { call_id: "call_b", provider_call_id: "call_02", tool: "save_evidence", status: "pending" },
      { call_id: "call_c", provider_call_id: "call_03", tool: "search_sources", status: "pending" },
    ],
  };

  it("says which pending call waits for an approval", () => {
    const lines = describeRun(
      run,
      new Map([
        ["call_b", "awaiting_approval"],
        ["call_c", "running"],
      ]),
    ).split("\n");
    expect(lines).toEqual([
      "run_1  running  model=scripted:c04",
      "  call_a  fetch_document   completed ok",
      "  call_b  save_evidence    pending (awaiting approval: see toolgate approvals list)",
      "  call_c  search_sources   pending",
    ]);
  });

  it("never marks a call that has ended as waiting", () => {
    expect(callStatus({ call_id: "call_a", status: "denied" }, new Map([["call_a", "awaiting_approval"]]))).toBe("denied");
  });
});
