import { describe, expect, it } from "vitest";
import { envPairs, readCommandLine } from "./command-line.js";

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

describe("envPairs", () => {
  it("reads NAME=value pairs with the prefix, values as given (an = and spaces included)", () => {
    expect(envPairs("OTEL_TRACES_SAMPLER=always_off, OTEL_RESOURCE_ATTRIBUTES=a=b", "OTEL_")).toEqual({
      ok: true,
      env: { OTEL_TRACES_SAMPLER: "always_off", OTEL_RESOURCE_ATTRIBUTES: "a=b" },
    });
    expect(envPairs("", "OTEL_")).toEqual({ ok: true, env: {} });
  });

  it.each(["PATH=/tmp", "OTEL_X", "=1", "otel_x=1", "OTEL_X-Y=1"])("refuses %j, naming it", (list) => {
    const pairs = envPairs(list, "OTEL_");
    expect(pairs.ok).toBe(false);
    if (!pairs.ok) expect(pairs.error).toContain(JSON.stringify(list));
  });
});
