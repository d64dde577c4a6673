import { describe, expect, it } from "vitest";
import { readCommandLine } from "./command-line.js";

const USAGE = "usage: tool [--runs 3] [--fast]";
const OPTIONS = { runs: { type: "string", default: "3" }, fast: { type: "boolean", default: false } } as const;

describe("readCommandLine", () => {
  it("gives the values, defaults filled in", () => {
    expect(readCommandLine("tool", USAGE, OPTIONS, ["--fast"])).toEqual({ ok: true, values: { runs: "3", fast: true, help: false } });
    expect(readCommandLine("tool", USAGE, OPTIONS, ["--runs", "5"])).toMatchObject({ ok: true, values: { runs: "5", fast: false } });
  });

  it("answers --help with the usage and exit 0", () => {
    expect(readCommandLine("tool", USAGE, OPTIONS, ["--help"])).toEqual({ ok: false, output: USAGE, exitCode: 0 });
  });

  it.each([
    [["--modle", "x"], /^tool: Unknown option '--modle'/],
    [["--runs"], /^tool: Option '--runs <value>' argument missing/],
    [["stray"], /^tool: Unexpected argument 'stray'/],
  ])("refuses %j with one line naming the problem, then the usage, exit 2", (argv, message) => {
    const line = readCommandLine("tool", USAGE, OPTIONS, argv);
    expect(line).toMatchObject({ ok: false, exitCode: 2 });
    if (line.ok) return;
    expect(line.output).toMatch(message);
    expect(line.output.split("\n").slice(1).join("\n")).toBe(USAGE);
    expect(line.output).not.toMatch(/\n\s+at /);
  });
});
