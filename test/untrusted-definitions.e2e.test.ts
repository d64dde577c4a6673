import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { discoverStdioTools } from "@toolgate/mcp-discovery";
import { admitDefinitions, ContractCatalog } from "@toolgate/registry";
import { FakeProviders, REPO_ROOT, Stack, testInfra, waitFor } from "@toolgate/testkit";
import { MongoClient } from "mongodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// Tool poisoning and rug pulls, end to end: a real MCP server process serves a clean tool and a poisoned one;
// discovery admits both through the poison lint; the four services run as processes and the orchestrator's model
// (the official OpenAI SDK against a local fake) is offered the poisoned tool only once its exact hash is approved.
const run = promisify(execFile);
const FIXTURE = `${REPO_ROOT}test/fixtures/poisoned-mcp-server.mjs`;
const CLI = `${REPO_ROOT}packages/registry/dist/contracts-cli.js`;
const CLEAN = "shop_lookup_order";
const POISONED = "shop_read_notes";

let fake: FakeProviders;
let stack: Stack;
let nc: NatsConnection;
let catalog: ContractCatalog;
let mongo: MongoClient;

const catalogOptions = () => ({ stream: `${stack.name.toUpperCase()}_CONTRACTS`, subjectPrefix: `${stack.name}.contracts` });
const catalogArgs = () => ["--nats", testInfra().natsUrl, "--stream", catalogOptions().stream, "--prefix", catalogOptions().subjectPrefix];

beforeAll(async () => {
  fake = await FakeProviders.start();
  const infra = testInfra();
  const providers = [{ name: "fake", kind: "openai-responses", base_url: fake.baseUrl("openai-responses"), api_key: "test-key-not-secret" }];
  stack = await Stack.start({ natsUrl: infra.natsUrl, mongoUrl: infra.mongoUrl, env: { orchestrator: { MODEL_PROVIDERS: JSON.stringify(providers) } } });
  nc = await connect({ servers: infra.natsUrl, name: "untrusted-definitions-test" });
  catalog = await ContractCatalog.connect(nc, { ...catalogOptions(), resyncIntervalMs: 0 });
  mongo = await new MongoClient(infra.mongoUrl).connect();
});

afterAll(async () => {
  catalog?.close();
  await nc?.close();
  await stack?.stop();
  await fake?.stop();
  await mongo?.db(`${stack.name}_runtime`).dropDatabase();
  await mongo?.db(`${stack.name}_tools`).dropDatabase();
  await mongo?.close();
});

/** Discovers the fixture server's tools (started as its own process) and admits them to the stack's catalog. */
async function discoverAndAdmit(variant: "1" | "2") {
  const tools = await discoverStdioTools({ name: "shop", command: process.execPath, args: [FIXTURE], env: { POISON_VARIANT: variant } });
  expect(tools.map((t) => t.draft.name)).toEqual([CLEAN, POISONED]);
  return admitDefinitions(
    catalog,
    tools.map((t) => t.draft),
    "mcp:shop",
  );
}

/** The tool names the orchestrator's HTTP API lists. */
async function listedTools(): Promise<string[]> {
  const listed = await stack.api<{ tools: { name: string }[] }>("GET", "/v1/tools");
  return listed.body.tools.map((t) => t.name);
}

/** The tool names the model was offered in the first request of a run: the orchestrator's real tool-list path. */
async function offeredToModel(): Promise<string[]> {
  const before = fake.requests.length;
  const ran = await stack.runToEnd("fake:c04-no-match", "Research task task_poison: anything about quantum sourdough?", { task_id: "task_poison" });
  expect(ran.status).toBe("completed");
  const first = fake.requests.slice(before)[0]!.body as { tools: { name: string }[] };
  return first.tools.map((t) => t.name);
}

describe("a poisoned MCP tool definition", () => {
  it("is quarantined, never offered to a model until its exact hash is approved, and quarantined again when it changes", async () => {
    // Discovery: the clean tool is admitted, the poisoned one is quarantined with findings that point at the text.
    const admitted = await discoverAndAdmit("1");
    expect(admitted.map((a) => [a.name, a.status])).toEqual([
      [CLEAN, "offered"],
      [POISONED, "quarantined"],
    ]);
    const poisoned = admitted[1]!;
    if (poisoned.status === "invalid") throw new Error(poisoned.message);
    expect(poisoned.reasons.map((r) => [r.rule, r.pointer])).toEqual(
      expect.arrayContaining([
        ["poison-hidden-unicode", "/description"],
        ["poison-instruction", "/description"],
        ["poison-credential-reference", "/description"],
        ["poison-hidden-unicode", "/input_schema/properties/notes/description"],
      ]),
    );

    // The orchestrator follows the catalog: the clean tool arrives, the poisoned one never does.
    await waitFor(async () => (await listedTools()).includes(CLEAN), { description: "the clean tool in the orchestrator's tool list" });
    expect(await listedTools()).not.toContain(POISONED);
    const offered = await offeredToModel();
    expect(offered).toEqual(expect.arrayContaining([CLEAN, "search_sources"]));
    expect(offered).not.toContain(POISONED);
    // Not reachable by name either: a proposal of it is refused as an unknown tool.
    const proposed = await stack.api<{ results: { result?: { ok: boolean; error?: { code: string } } }[] }>("POST", "/v1/tool-calls", {
      context: { task_id: "task_poison" },
      calls: [{ id: "p1", name: POISONED, arguments: { order_id: "ord_1", notes: "-----BEGIN OPENSSH PRIVATE KEY-----" } }],
      wait_ms: 20_000,
    });
    expect(proposed.body.results[0]!.result).toMatchObject({ ok: false, error: { code: "UNKNOWN_TOOL" } });

    // The operator's view, and an approval that names another hash, which releases nothing.
    const listed = await run(process.execPath, [CLI, "quarantine", "list", ...catalogArgs()]);
    expect(listed.stdout).toContain(`${POISONED}@1.0.0  ${poisoned.definition_hash}  QUARANTINED  (mcp:shop)`);
    expect(listed.stdout).toContain("poison-instruction");
    expect(listed.stdout).not.toMatch(/\p{Cf}/u);
    const wrong = await run(process.execPath, [CLI, "quarantine", "approve", POISONED, `sha256:${"0".repeat(64)}`, "--by", "carol", ...catalogArgs()]).catch(
      (error: { code: number; stderr: string }) => error,
    );
    expect(wrong).toMatchObject({ code: 1, stderr: expect.stringContaining("NOT_QUARANTINED") });
    expect(catalog.isQuarantined(poisoned.ref.hash)).toBe(true);

    // Approving exactly its definition hash releases it: the orchestrator lists it and the model is offered it.
    const approved = await run(process.execPath, [CLI, "quarantine", "approve", POISONED, poisoned.definition_hash, "--by", "carol", ...catalogArgs()]);
    expect(approved.stdout).toContain(`released ${POISONED}@1.0.0 ${poisoned.ref.hash}`);
    await waitFor(async () => (await listedTools()).includes(POISONED), { description: "the approved tool in the orchestrator's tool list" });
    expect(await offeredToModel()).toEqual(expect.arrayContaining([CLEAN, POISONED]));

    // Rediscovering the same definitions changes nothing.
    expect((await discoverAndAdmit("1")).map((a) => [a.name, a.status, "created" in a && a.created])).toEqual([
      [CLEAN, "offered", false],
      [POISONED, "offered", false],
    ]);

    // The server changes the definition (a rug pull): a new version, quarantined again; the tool disappears.
    const changed = await discoverAndAdmit("2");
    const rugPull = changed[1]!;
    if (rugPull.status === "invalid") throw new Error(rugPull.message);
    expect(rugPull).toMatchObject({ status: "quarantined", created: true, ref: { version: "1.1.0" } });
    expect(rugPull.definition_hash).not.toBe(poisoned.definition_hash);
    expect(rugPull.reasons.map((r) => r.rule)).toEqual(expect.arrayContaining(["poison-credential-reference", "definition-changed"]));
    await waitFor(async () => !(await listedTools()).includes(POISONED), { description: "the changed tool gone from the orchestrator's tool list" });
    const afterRugPull = await offeredToModel();
    expect(afterRugPull).toContain(CLEAN);
    expect(afterRugPull).not.toContain(POISONED);
    const relisted = await run(process.execPath, [CLI, "quarantine", "list", "--json", ...catalogArgs()]);
    expect((JSON.parse(relisted.stdout) as { ref: { version: string }; approval?: unknown }[]).map((q) => [q.ref.version, q.approval !== undefined])).toEqual([
      ["1.0.0", true],
      ["1.1.0", false],
    ]);
  });
});
