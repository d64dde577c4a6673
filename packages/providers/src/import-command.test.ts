import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { lintContracts, loadContractFiles, ToolRegistry, type ToolContractInput } from "@toolgate/registry";
import { afterEach, describe, expect, it } from "vitest";
import { runImportCommand } from "./import-command.js";

const FIXTURE = fileURLToPath(new URL("./__fixtures__/real-world-openai-tools.json", import.meta.url));
const dirs: string[] = [];

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "toolgate-import-"));
  dirs.push(dir);
  return dir;
}

async function run(argv: string[]): Promise<{ code: number; out: string[]; err: string[] }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runImportCommand(argv, { out: (l) => out.push(l), err: (l) => err.push(l) });
  return { code, out, err };
}

afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe("toolgate-import", () => {
  it("writes one draft contract file per tool and prints what was assumed and what the linter wants", async () => {
    const out = join(tempDir(), "drafts");
    const result = await run(["--provider", "openai-chat", FIXTURE, "--out", out]);
    expect(result.err).toEqual([]);
    expect(result.code).toBe(0);
    const files = readdirSync(out).sort();
    expect(files).toHaveLength(21);
    expect(files).toContain("uber_ride.json");
    const uber = JSON.parse(readFileSync(join(out, "uber_ride.json"), "utf8")) as ToolContractInput;
    expect(uber).toMatchObject({ name: "uber_ride", aliases: ["uber.ride"], side_effect: "write", risk: "medium", version: "0.1.0" });
    const text = result.out.join("\n");
    expect(text).toContain(`draft uber_ride (imported as "uber.ride", kept as an alias) → ${join(out, "uber_ride.json")}`);
    expect(text).toMatch(/assumed \/side_effect\s+"write"/);
    expect(text).toMatch(/error\s+object-not-closed\s+\/input_schema/);
    expect(text).toMatch(/error\s+description-when-not\s+\/description/);
    // The summary counts exactly the errors the linter finds in the files written.
    const written = await loadContractFiles([out]);
    const errors = lintContracts(written.map((w) => w.contract)).flatMap((r) => r.findings.filter((f) => f.severity === "error")).length;
    expect(result.out.at(-1)).toBe(`21 drafts written to ${out}; ${errors} lint errors to complete (then: toolgate-contracts lint ${out})`);
    // The files load back as contracts the registry compiles, aliases included.
    const registry = ToolRegistry.from(written.map((w) => w.contract as ToolContractInput));
    expect(registry.get("GetWeather")?.contract.name).toMatch(/^get_weather_/);
  });

  it("refuses to overwrite drafts without --force, and reports unreadable input and usage errors", async () => {
    const out = tempDir();
    expect((await run(["--provider", "openai-chat", FIXTURE, "--out", out])).code).toBe(0);
    const again = await run(["--provider", "openai-chat", FIXTURE, "--out", out]);
    expect(again.code).toBe(1);
    expect(again.err[0]).toMatch(/exists; give --force/);
    expect((await run(["--provider", "openai-chat", FIXTURE, "--out", out, "--force"])).code).toBe(0);

    const bad = join(tempDir(), "bad.json");
    writeFileSync(bad, '[{"type":"function","function":{"name":"a"}},{"type":"function","function":{"name":"a"}}]');
    const duplicate = await run(["--provider", "openai-chat", bad, "--out", out]);
    expect(duplicate).toMatchObject({ code: 1, err: [expect.stringContaining("DUPLICATE_TOOL_NAME")] });
    writeFileSync(bad, '{"a":1,"a":2}');
    expect((await run(["--provider", "openai-chat", bad, "--out", out])).code).toBe(1);
    expect((await run(["--provider", "bedrock", FIXTURE, "--out", out])).code).toBe(2);
    expect((await run(["--provider", "openai-chat", FIXTURE])).code).toBe(2);
  });
});
