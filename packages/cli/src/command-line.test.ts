import { describe, expect, it } from "vitest";
import { parseCommandLine, UsageError } from "./command-line.js";

describe("parseCommandLine", () => {
  it("reads a command, its argument and its options", () => {
    expect(parseCommandLine(["runs", "start", "--model", "scripted:c04", "--wait", "--task=t1"])).toMatchObject({
      kind: "run",
      command: { name: "runs start" },
      args: [],
      options: { model: "scripted:c04", wait: true, task: "t1" },
    });
    expect(parseCommandLine(["audit", "run_1", "--verify"])).toMatchObject({ kind: "run", command: { name: "audit" }, args: ["run_1"] });
    expect(parseCommandLine(["approvals"])).toMatchObject({ kind: "run", command: { name: "approvals list" } });
    expect(parseCommandLine(["keys", "--role", "policy"])).toMatchObject({ kind: "run", command: { name: "keys" }, options: { role: "policy" } });
    expect(() => parseCommandLine(["keys", "policy"])).toThrow(/keys: unexpected argument "policy"/);
  });

  it("answers --help anywhere, for the command it follows", () => {
    expect(parseCommandLine([])).toEqual({ kind: "help" });
    expect(parseCommandLine(["--help"])).toEqual({ kind: "help" });
    expect(parseCommandLine(["runs", "-h"])).toEqual({ kind: "help", group: "runs" });
    expect(parseCommandLine(["runs", "start", "--modle", "x", "--help"])).toMatchObject({ kind: "help", command: { name: "runs start" } });
  });

  it("refuses an option the command does not take, even one another command takes", () => {
    expect(() => parseCommandLine(["tools", "--wait"])).toThrow(new UsageError("tools: unknown option --wait (see toolgate tools --help)"));
    expect(() => parseCommandLine(["tail", "-x"])).toThrow(/tail: unknown option -x/);
  });
});
