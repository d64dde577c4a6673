import { randomBytes } from "node:crypto";
import { canonicalJson, sha256 } from "@toolgate/contracts";
import { searchSourcesContract } from "@toolgate/research-tools";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { testInfra } from "@toolgate/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ContractCatalog, type CatalogChange, type CatalogRejection } from "./contract-catalog.js";
import { contractHash, ToolContractSchema, type ToolContractInput } from "./contract.js";

type TestConnection = NatsConnection;
const natsUrl = (): string => testInfra().natsUrl;
const decoder = new TextDecoder();
let nc: TestConnection;

beforeAll(async () => {
  nc = await connect({ servers: natsUrl(), name: "catalog-test" });
});

afterAll(async () => {
  await nc?.close();
});

/** A private stream and subject prefix per test. */
function names(): { stream: string; subjectPrefix: string } {
  const id = randomBytes(5).toString("hex");
  return { stream: `TGC_${id}`, subjectPrefix: `tgc_${id}.contracts` };
}

async function dropStream(stream: string): Promise<void> {
  await nc.request(`$JS.API.STREAM.DELETE.${stream}`, "", { timeout: 5_000 });
}

/** Resolves with the first change `catalog` reports that satisfies `match`. */
function nextChange(catalog: ContractCatalog, match: (change: CatalogChange) => boolean): Promise<CatalogChange> {
  return new Promise((resolve) => {
    const stop = catalog.onChange((change) => {
      if (match(change)) {
        stop();
        resolve(change);
      }
    });
  });
}

const v1 = searchSourcesContract;
const v2: ToolContractInput = {
  ...v1,
  version: "1.1.0",
  input_schema: { ...v1.input_schema, properties: { ...(v1.input_schema.properties as object), limit: { type: "integer", minimum: 1, maximum: 20 } } },
};
const C04 = { query: "OpenAI Agents SDK state management", source_type: "official", limit: 15 };

describe("ContractCatalog on a real JetStream server", () => {
  it("distributes a new version to another replica without a restart, keeping the old one addressable by hash", async () => {
    const options = { ...names(), resyncIntervalMs: 0 };
    const publisher = await ContractCatalog.connect(nc, options);
    // A second replica, on its own connection, started before anything is published.
    const otherConnection = await connect({ servers: natsUrl(), name: "catalog-replica" });
    const replica = await ContractCatalog.connect(otherConnection, options);
    try {
      expect(replica.registry().list()).toEqual([]);
      const first = nextChange(replica, (c) => c.ref.version === "1.0.0");
      expect(await publisher.publish(v1)).toMatchObject({ ok: true, created: true, ref: { name: "search_sources", version: "1.0.0" } });
      expect(await first).toMatchObject({ current: true });
      const v1Hash = contractHash(ToolContractSchema.parse(v1));
      expect(replica.registry().get("search_sources")?.hash).toBe(v1Hash);

      const second = nextChange(replica, (c) => c.ref.version === "1.1.0");
      const published = await publisher.publish(v2);
      if (!published.ok) throw new Error(published.message);
      expect(await second).toEqual({ ref: published.ref, current: true, previous: { name: "search_sources", version: "1.0.0", hash: v1Hash } });

      // The replica validates new calls against 1.1.0, and a call validated against 1.0.0 against exactly 1.0.0.
      const registry = replica.registry();
      const current = registry.get("search_sources")!;
      const old = registry.getByHash(v1Hash)!;
      expect(current.ref.version).toBe("1.1.0");
      expect(registry.checkArguments(current, JSON.stringify(C04)).ok).toBe(true);
      expect(registry.checkArguments(old, JSON.stringify(C04))).toMatchObject({ ok: false, violations: [{ pointer: "/limit" }] });
      expect(replica.get(v1Hash)?.ref.version).toBe("1.0.0");

      // A hash nobody published is unknown: a service refuses the call rather than run another version.
      expect(await replica.resolve(`sha256:${"0".repeat(64)}`)).toBeUndefined();
    } finally {
      publisher.close();
      replica.close();
      await otherConnection.close();
      await dropStream(options.stream);
    }
  });

  it("finds a version published a moment ago by hash, even before the notification arrives", async () => {
    const options = { ...names(), resyncIntervalMs: 0 };
    const publisher = await ContractCatalog.connect(nc, options);
    const replica = await ContractCatalog.connect(nc, options);
    try {
      replica.close(); // no live notifications: only resolve() can learn about the new version
      const published = await publisher.publish(v1);
      if (!published.ok) throw new Error(published.message);
      expect(replica.get(published.ref.hash)).toBeUndefined();
      expect((await replica.resolve(published.ref.hash))?.ref).toEqual(published.ref);
    } finally {
      publisher.close();
      await dropStream(options.stream);
    }
  });

  it("loads what was published before it started, keeps the highest version current and refuses version conflicts", async () => {
    const options = { ...names(), resyncIntervalMs: 0 };
    const publisher = await ContractCatalog.connect(nc, options);
    try {
      await publisher.publish(v2);
      await publisher.publish(v1); // an older version published later does not become current
      expect(await publisher.publish(v1)).toMatchObject({ ok: true, created: false });
      const changed = { ...v1, description: `${v1.description} Changed.` };
      expect(await publisher.publish(changed)).toMatchObject({ ok: false, code: "VERSION_CONFLICT" });
      expect(await publisher.publish({ ...v1, name: "Bad Name" })).toMatchObject({ ok: false, code: "INVALID_CONTRACT" });

      const late = await ContractCatalog.connect(nc, options);
      late.close();
      expect(late.registry().get("search_sources")?.ref.version).toBe("1.1.0");
      expect(
        late
          .registry()
          .list()
          .map((t) => t.ref.name),
      ).toEqual(["search_sources"]);
    } finally {
      publisher.close();
      await dropStream(options.stream);
    }
  });

  it("refuses stored entries whose content does not match the hash in their subject", async () => {
    const options = { ...names(), resyncIntervalMs: 0 };
    const rejections: CatalogRejection[] = [];
    const catalog = await ContractCatalog.connect(nc, { ...options, onRejected: (r) => rejections.push(r) });
    try {
      const genuine = canonicalJson(ToolContractSchema.parse(v1));
      const tampered = canonicalJson({ ...ToolContractSchema.parse(v1), enabled: false });
      const subject = `${options.subjectPrefix}.search_sources.${sha256(genuine).slice(7)}`;
      await nc.request(subject, tampered, { timeout: 5_000 });
      await nc.request(`${options.subjectPrefix}.search_sources.nothex`, "{", { timeout: 5_000 });
      await catalog.refresh();
      expect(rejections.map((r) => r.reason)).toEqual(["content does not match the hash in its subject", expect.stringMatching(/^not JSON/)]);
      expect(catalog.registry().list()).toEqual([]);
    } finally {
      catalog.close();
      await dropStream(options.stream);
    }
  });

  it("creates an append-only stream: stored versions cannot be deleted", async () => {
    const options = { ...names(), resyncIntervalMs: 0 };
    const catalog = await ContractCatalog.connect(nc, options);
    try {
      await catalog.publish(v1);
      const reply = await nc.request(`$JS.API.STREAM.MSG.DELETE.${options.stream}`, JSON.stringify({ seq: 1 }), { timeout: 5_000 });
      expect(JSON.parse(decoder.decode(reply.data))).toMatchObject({ error: { err_code: 10057 } });
    } finally {
      catalog.close();
      await dropStream(options.stream);
    }
  });
});

describe("ContractCatalog quarantine on a real JetStream server", () => {
  const pin = (n: number) => `sha256:${String(n).repeat(64).slice(0, 64)}`;
  const mcpVersion = (version: string, definitionHash: string): ToolContractInput => ({
    ...v1,
    name: "files_search",
    version,
    transport: { kind: "mcp", server: "files", tool: "search", definition_hash: definitionHash },
  });
  const reasons = [{ rule: "poison-instruction", pointer: "/description", message: "reads as an instruction" }];
  const offered = (catalog: ContractCatalog) => catalog.offeredTools().map((t) => `${t.ref.name}@${t.ref.version}`);

  it("holds a quarantined version back on every replica until exactly its definition hash is approved, and again after a change", async () => {
    const options = { ...names(), resyncIntervalMs: 0 };
    const publisher = await ContractCatalog.connect(nc, options);
    const otherConnection = await connect({ servers: natsUrl(), name: "catalog-replica" });
    const replica = await ContractCatalog.connect(otherConnection, options);
    try {
      await publisher.publish(v1);
      const clean = await publisher.publish(mcpVersion("1.0.0", pin(1)));
      if (!clean.ok) throw new Error(clean.message);
      await replica.refresh();
      expect(offered(replica)).toEqual(["files_search@1.0.0", "search_sources@1.0.0"]);

      // A changed definition, flagged: neither offered nor reachable by name anywhere, but kept addressable by hash.
      const held = nextChange(replica, (c) => c.ref.version === "1.1.0");
      const poisoned = await publisher.publish(mcpVersion("1.1.0", pin(2)), { reasons, source: "mcp:files" });
      if (!poisoned.ok) throw new Error(poisoned.message);
      expect(await held).toEqual({ ref: poisoned.ref, current: false, quarantined: true });
      for (const catalog of [publisher, replica]) {
        expect(catalog.isQuarantined(poisoned.ref.hash)).toBe(true);
        expect(catalog.isQuarantined(clean.ref.hash)).toBe(false);
        expect(offered(catalog)).toEqual(["search_sources@1.0.0"]);
        expect(catalog.registry().get("files_search")).toBeUndefined();
        expect(catalog.registry().getByHash(poisoned.ref.hash)?.ref).toEqual(poisoned.ref);
        expect(catalog.quarantined()).toEqual([
          { ref: poisoned.ref, definition_hash: pin(2), reasons, source: "mcp:files", quarantined_at: expect.any(String) },
        ]);
      }
      // Publishing the same quarantined content again changes nothing.
      expect(await publisher.publish(mcpVersion("1.1.0", pin(2)), { reasons })).toMatchObject({ ok: true, created: false });

      // Approving another hash releases nothing; the exact hash releases it everywhere.
      expect(await publisher.approveDefinition("files_search", pin(1), "carol")).toMatchObject({ ok: false, code: "NOT_QUARANTINED" });
      expect(await publisher.approveDefinition("other_tool", pin(2), "carol")).toMatchObject({ ok: false, code: "NOT_QUARANTINED" });
      expect(offered(replica)).toEqual(["search_sources@1.0.0"]);
      const released = nextChange(replica, (c) => c.released === true);
      expect(await publisher.approveDefinition("files_search", pin(2), "carol")).toEqual({ ok: true, created: true, released: [poisoned.ref] });
      expect(await released).toEqual({ ref: poisoned.ref, current: true, released: true });
      for (const catalog of [publisher, replica]) {
        expect(catalog.isQuarantined(poisoned.ref.hash)).toBe(false);
        expect(offered(catalog)).toEqual(["files_search@1.1.0", "search_sources@1.0.0"]);
        expect(catalog.quarantined()[0]!.approval).toEqual({ approved_by: "carol", approved_at: expect.any(String) });
      }
      expect(await publisher.approveDefinition("files_search", pin(2), "carol")).toMatchObject({ ok: true, created: false });

      // The server changes the definition again (a rug pull): the approval of the old hash does not cover it.
      const rugPull = await publisher.publish(mcpVersion("1.2.0", pin(3)), { reasons });
      if (!rugPull.ok) throw new Error(rugPull.message);
      await replica.refresh();
      for (const catalog of [publisher, replica]) {
        expect(catalog.isQuarantined(rugPull.ref.hash)).toBe(true);
        expect(offered(catalog)).toEqual(["search_sources@1.0.0"]);
      }

      // A replica started later rebuilds the same state from the stream alone.
      const late = await ContractCatalog.connect(nc, options);
      late.close();
      expect(offered(late)).toEqual(["search_sources@1.0.0"]);
      expect(late.quarantined().map((q) => [q.ref.version, q.approval !== undefined])).toEqual([
        ["1.1.0", true],
        ["1.2.0", false],
      ]);
    } finally {
      publisher.close();
      replica.close();
      await otherConnection.close();
      await dropStream(options.stream);
    }
  });

  it("refuses quarantine records and approvals whose subject does not match their content", async () => {
    const options = { ...names(), resyncIntervalMs: 0 };
    const rejections: CatalogRejection[] = [];
    const catalog = await ContractCatalog.connect(nc, { ...options, onRejected: (r) => rejections.push(r) });
    try {
      const forged = { kind: "approval", tool: "files_search", definition_hash: pin(2), approved_by: "mallory", at: new Date().toISOString() };
      await nc.request(`${options.subjectPrefix}.approval.files_search.${"9".repeat(64)}`, JSON.stringify(forged), { timeout: 5_000 });
      await nc.request(`${options.subjectPrefix}.release.files_search.${"2".repeat(64)}`, JSON.stringify(forged), { timeout: 5_000 });
      await catalog.refresh();
      expect(rejections.map((r) => r.reason)).toEqual(["not an approval of the definition its subject names", expect.stringMatching(/^subject is not/)]);
    } finally {
      catalog.close();
      await dropStream(options.stream);
    }
  });
});
