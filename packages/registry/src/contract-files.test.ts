import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { searchSourcesContract } from "@toolgate/research-tools";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadContractFiles, parseContractDocument } from "./contract-files.js";
import { lintContract } from "./contract-lint.js";
import { contractHash, ToolContractSchema } from "./contract.js";
import { ContractError, ToolRegistry } from "./registry.js";

// Seed 000's search_sources, as YAML, with the runtime half of the contract and a bound on the query.
const SEED_YAML = `
name: search_sources
version: 1.0.0
description: >
  按查询词发现候选技术资料，返回标题、URL、来源类型和摘要。
  仅在需要发现资料时使用；已有 URL 或需要完整正文时不要使用。
owner: research-platform
input_schema:
  type: object
  properties:
    query: { type: string, minLength: 3, maxLength: 256 }
    source_type: { enum: [official, any] }
    limit: { type: integer, minimum: 1, maximum: 10 }
  required: [query, source_type, limit]
  additionalProperties: false
output_schema: { type: object }
side_effect: read
risk: low
timeout_ms: 2000
idempotency: { kind: natural }
`;

let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "toolgate-contracts-"));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("contracts from files", () => {
  it("loads the seed's YAML contract, which the registry compiles and which refuses limit 50", () => {
    const [contract] = parseContractDocument(SEED_YAML, "yaml", "seed.yaml");
    expect(lintContract(contract).ok).toBe(true);
    const registry = ToolRegistry.from([ToolContractSchema.parse(contract)]);
    const tool = registry.get("search_sources")!;
    expect(registry.checkArguments(tool, '{"query":"agents sdk","source_type":"official","limit":50}')).toMatchObject({
      ok: false,
      violations: [{ pointer: "/limit" }],
    });
  });

  it("loads JSON and YAML from a directory, in a stable order, in every document shape", async () => {
    await mkdir(join(dir, "set", "nested"), { recursive: true });
    await writeFile(join(dir, "set", "b.yaml"), SEED_YAML);
    await writeFile(join(dir, "set", "a.json"), JSON.stringify({ contracts: [searchSourcesContract] }));
    await writeFile(join(dir, "set", "nested", "c.yml"), `- ${JSON.stringify({ ...searchSourcesContract, version: "1.0.1" })}\n`);
    await writeFile(join(dir, "set", "notes.txt"), "not a contract");
    const found = await loadContractFiles([join(dir, "set")]);
    expect(found.map((f) => f.source.slice(dir.length))).toEqual(["/set/a.json", "/set/b.yaml", "/set/nested/c.yml"]);
    // The same contract read from JSON has the same content hash as the TypeScript one.
    expect(contractHash(ToolContractSchema.parse(found[0]!.contract))).toBe(contractHash(ToolContractSchema.parse(searchSourcesContract)));
  });

  it("refuses duplicate keys in JSON and YAML, non-JSON YAML values and alias bombs", () => {
    expect(() => parseContractDocument('{"name":"a","name":"b"}', "json", "dup.json")).toThrow(/dup.json: the key "name" appears twice/);
    expect(() => parseContractDocument("name: a\nname: b\n", "yaml", "dup.yaml")).toThrow(ContractError);
    expect(() => parseContractDocument("name: a\ntimeout_ms: .inf\n", "yaml", "inf.yaml")).toThrow(/timeout_ms: Infinity is not a JSON number/);
    const bomb = [
      "a: &a [x, x, x, x, x, x, x, x, x, x]",
      ..."bcdefghij".split("").map((k, i) => `${k}: &${k} [${Array(10).fill(`*${"abcdefghij"[i]}`).join(", ")}]`),
    ].join("\n");
    expect(() => parseContractDocument(bomb, "yaml", "bomb.yaml")).toThrow(ContractError);
    expect(() => parseContractDocument("42", "json", "n.json")).toThrow(/expected a contract/);
  });

  it("keeps a __proto__ key in YAML an own property", () => {
    const [contract] = parseContractDocument("__proto__: { polluted: true }\nname: x\n", "yaml");
    expect(Object.getPrototypeOf(contract)).toBe(Object.prototype);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it("names the file that cannot be read", async () => {
    await expect(loadContractFiles([join(dir, "missing.yaml")])).rejects.toThrow(/missing\.yaml/);
  });
});
