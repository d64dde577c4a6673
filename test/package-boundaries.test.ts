import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

// Services depend on contracts, not on tool code: only the executor links tool implementations, and the test
// tool sets are a dependency of nothing that ships.
const root = join(import.meta.dirname, "..");
const TOOL_PACKAGES = ["@toolgate/toolsets", "@toolgate/test-toolsets", "@toolgate/research-tools"];
const TEST_ONLY = ["@toolgate/test-toolsets", "@toolgate/testkit", "@toolgate/devtools"];

interface Manifest {
  name: string;
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
}
const manifest = (dir: string): Manifest => JSON.parse(readFileSync(join(root, dir, "package.json"), "utf8")) as Manifest;
const workspaces = ["packages", "services"].flatMap((group) => readdirSync(join(root, group)).map((name) => `${group}/${name}`));

/** Every `.ts` file under `dir`, recursively. */
function sources(dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith(".ts"))
    .map((entry) => join(entry.parentPath, entry.name));
}

describe("package boundaries", () => {
  it.each(["services/policy", "services/audit"])("%s lists no tool package among its dependencies of any kind", (dir) => {
    const { dependencies = {}, devDependencies = {} } = manifest(dir);
    expect(Object.keys({ ...dependencies, ...devDependencies }).filter((d) => TOOL_PACKAGES.includes(d))).toEqual([]);
  });

  // Its tests use the research corpus (a devDependency, never installed in an image).
  it("the orchestrator runs on no tool package", () => {
    expect(Object.keys(manifest("services/orchestrator").dependencies ?? {}).filter((d) => TOOL_PACKAGES.includes(d))).toEqual([]);
  });

  it.each(["services/policy", "services/audit", "services/orchestrator"])("no source file of %s but its tests imports a tool package", (dir) => {
    const offending = sources(`${dir}/src`)
      .filter((file) => !file.endsWith(".test.ts"))
      .filter((file) => TOOL_PACKAGES.some((p) => readFileSync(file, "utf8").includes(`from "${p}"`)));
    expect(offending).toEqual([]);
  });

  it("no package a production image installs depends on a test-only package", () => {
    const shipped = workspaces.filter((dir) => !TEST_ONLY.includes(manifest(dir).name));
    const offending = shipped.flatMap((dir) =>
      Object.keys(manifest(dir).dependencies ?? {})
        .filter((d) => TEST_ONLY.includes(d))
        .map((d) => `${dir} → ${d}`),
    );
    expect(offending).toEqual([]);
  });
});
