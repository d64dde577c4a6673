import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jetstreamManager, StorageType } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { subjectCatalogue, type SubjectCatalogue } from "@toolgate/contracts";
import { createLogger } from "@toolgate/telemetry";
import { freePort, REPO_ROOT, testInfra, uniqueName, waitFor } from "@toolgate/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NatsEventBus, type NatsEventBusOptions } from "./nats-event-bus.js";
import { NatsSyncError, NatsVersionError, StreamSettingsError, type NatsRefusal } from "./server-guards.js";

// Each start-up guard's refusal and message, against real servers: the shared test server (2.12.3+), the
// machine's own nats-server 2.9 on 4222 (too old for multi-filter consumers), and a private three-node
// cluster in which one server keeps the default sync interval.
const OLD_NATS_URL = "nats://127.0.0.1:4222";
const logger = createLogger({ service: "test", level: "silent" });

function options(servers: string, subjects: SubjectCatalogue, overrides: Partial<NatsEventBusOptions> = {}): NatsEventBusOptions {
  return {
    servers,
    name: "guard-test",
    subjects,
    maxEventBytes: 8 * 1024,
    stream: { replicas: 1, maxAgeMs: 600_000, duplicateWindowMs: 60_000 },
    logger,
    ...overrides,
  };
}

/** Connects expecting a refusal; returns it. */
async function refusal(opts: NatsEventBusOptions): Promise<NatsRefusal> {
  // A cluster that has only just formed can take longer than a request's timeout to create a replicated stream:
  // a timeout is the servers not answering yet, not the guard's answer, so the connect is made again.
  for (let attempt = 1; ; attempt++) {
    const outcome = await NatsEventBus.connect(opts).then(
      async (bus) => {
        await bus.close();
        return undefined;
      },
      (error: unknown) => error,
    );
    if (!(outcome instanceof Error)) throw new Error("connect was expected to refuse");
    if (outcome.name === "TimeoutError" && attempt < 5) continue;
    return outcome as NatsRefusal;
  }
}

async function deleteStream(servers: string, stream: string): Promise<void> {
  const nc = await connect({ servers: servers.split(",") });
  const jsm = await jetstreamManager(nc);
  await jsm.streams.delete(stream).catch(() => undefined);
  await nc.close();
}

describe("NATS version guard", () => {
  it("refuses a server older than 2.10 even when told to allow unsafe settings", async () => {
    const subjects = subjectCatalogue(uniqueName("g"));
    const allowed: NatsRefusal[] = [];
    const error = await refusal(options(OLD_NATS_URL, subjects, { allowUnsafe: (r) => allowed.push(r) > 0 }));
    expect(error).toBeInstanceOf(NatsVersionError);
    expect(error).toMatchObject({ code: "NATS_VERSION_UNSAFE", guard: "nats-version", setting: "nats-server version", overridable: false });
    expect(error.message).toMatch(
      /^nats-server 2\.9\.\d+ \(.+ at 127\.0\.0\.1:4222\) is older than 2\.10\.0: Toolgate's consumers need several filter subjects per consumer; upgrade to 2\.12\.3 or later \(no override: this cannot work\)$/,
    );
    // Never asked: nothing can let it pass. And the server was left alone: no stream was created.
    expect(allowed).toHaveLength(0);
  });

  it("refuses a server older than the minimum, and lets the override pass it", async () => {
    const subjects = subjectCatalogue(uniqueName("g"));
    const url = testInfra().natsUrl;
    // The test server is 2.12.3 or later: raising the bar above it shows the refusal a 2.10–2.12.2 server gets.
    const error = await refusal(options(url, subjects, { minServerVersion: "99.0.0" }));
    expect(error).toBeInstanceOf(NatsVersionError);
    expect(error).toMatchObject({ guard: "nats-version", overridable: true });
    expect(error.message).toMatch(
      /^nats-server \d+\.\d+\.\d+ \(.+\) is older than 2\.12\.3, which fixed the acknowledged-write losses Jepsen found in 2\.12\.1: upgrade the server \(for development only, TOOLGATE_UNSAFE_ALLOW=nats-version starts anyway\)$/,
    );
    const allowed: NatsRefusal[] = [];
    const bus = await NatsEventBus.connect(options(url, subjects, { minServerVersion: "99.0.0", allowUnsafe: (r) => allowed.push(r) > 0 }));
    await bus.close();
    expect(allowed.map((r) => r.guard)).toEqual(["nats-version"]);
    await deleteStream(url, subjects.stream);
  });
});

describe("stream settings guard", () => {
  it("refuses an existing stream on memory storage, and leaves it as it is under the override", async () => {
    const url = testInfra().natsUrl;
    const subjects = subjectCatalogue(uniqueName("g"));
    const nc = await connect({ servers: url });
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: subjects.stream, subjects: [subjects.allCalls, subjects.allRuns], storage: StorageType.Memory });
    try {
      const error = await refusal(options(url, subjects));
      expect(error).toBeInstanceOf(StreamSettingsError);
      expect(error).toMatchObject({ code: "STREAM_SETTINGS_MISMATCH", guard: "stream-settings", setting: "stream storage" });
      expect(error.message).toBe(
        `stream ${subjects.stream} keeps its messages in memory storage, not on file: recreate it (storage cannot be changed) (for development only, TOOLGATE_UNSAFE_ALLOW=stream-settings starts anyway)`,
      );
      const bus = await NatsEventBus.connect(options(url, subjects, { allowUnsafe: () => true }));
      await bus.close();
      expect((await jsm.streams.info(subjects.stream)).config.storage).toBe(StorageType.Memory);
    } finally {
      await jsm.streams.delete(subjects.stream);
      await nc.close();
    }
  });

  it("refuses an existing stream with fewer replicas than STREAM_REPLICAS instead of rescaling it", async () => {
    const url = testInfra().natsUrl;
    const subjects = subjectCatalogue(uniqueName("g"));
    const first = await NatsEventBus.connect(options(url, subjects));
    await first.close();
    try {
      const error = await refusal(options(url, subjects, { stream: { replicas: 3, maxAgeMs: 600_000, duplicateWindowMs: 60_000 } }));
      expect(error).toBeInstanceOf(StreamSettingsError);
      expect(error).toMatchObject({ setting: "STREAM_REPLICAS" });
      expect(error.message).toBe(
        `stream ${subjects.stream} has 1 replica(s) but STREAM_REPLICAS is 3: scale the stream (nats stream edit ${subjects.stream} --replicas 3) or set STREAM_REPLICAS=1 (for development only, TOOLGATE_UNSAFE_ALLOW=stream-settings starts anyway)`,
      );
    } finally {
      await deleteStream(url, subjects.stream);
    }
  });
});

/** Three nats-servers with routes and JetStream on loopback; `syncAlways` per node. */
interface ClusterNode {
  name: string;
  client: number;
  monitor: number;
  route: number;
  syncAlways: boolean;
}

class ConfiguredCluster {
  readonly #dir = mkdtempSync(join(tmpdir(), "tg-guard-cluster-"));
  readonly #children: ChildProcess[] = [];
  constructor(readonly nodes: ClusterNode[]) {}

  static async start(syncAlways: readonly boolean[]): Promise<ConfiguredCluster> {
    const binary = join(REPO_ROOT, "infra/.bin/nats-server");
    if (!existsSync(binary)) throw new Error(`${binary} is missing: ./infra/dev.sh up builds it`);
    const nodes: ClusterNode[] = [];
    for (const [i, sync] of syncAlways.entries())
      nodes.push({ name: `guard-n${i + 1}`, client: await freePort(), monitor: await freePort(), route: await freePort(), syncAlways: sync });
    const cluster = new ConfiguredCluster(nodes);
    const routes = nodes.map((n) => `nats-route://127.0.0.1:${n.route}`).join(", ");
    for (const node of nodes) {
      const file = join(cluster.#dir, `${node.name}.conf`);
      writeFileSync(
        file,
        [
          `server_name: ${node.name}`,
          `listen: 127.0.0.1:${node.client}`,
          `http: 127.0.0.1:${node.monitor}`,
          `jetstream { store_dir: "${join(cluster.#dir, node.name)}"${node.syncAlways ? ", sync_interval: always" : ""} }`,
          `cluster { name: guards, listen: 127.0.0.1:${node.route}, routes: [${routes}] }`,
        ].join("\n"),
      );
      cluster.#children.push(spawn(binary, ["-c", file], { stdio: "ignore" }));
    }
    // Ready when every server reports a JetStream meta leader and all three peers.
    await waitFor(
      async () => {
        for (const node of nodes) {
          const jsz = (await (await fetch(`http://127.0.0.1:${node.monitor}/jsz`)).json()) as { meta_cluster?: { leader?: string; cluster_size?: number } };
          if (!jsz.meta_cluster?.leader || jsz.meta_cluster.cluster_size !== nodes.length) return false;
        }
        return true;
      },
      { description: "the cluster's JetStream meta leader", timeoutMs: 30_000 },
    );
    return cluster;
  }

  get url(): string {
    return this.nodes.map((n) => `nats://127.0.0.1:${n.client}`).join(",");
  }

  get monitorUrls(): string[] {
    return this.nodes.map((n) => `http://127.0.0.1:${n.monitor}`);
  }

  async stop(): Promise<void> {
    await Promise.all(
      this.#children.map(
        (child) =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) return resolve();
            child.once("exit", () => resolve());
            child.kill("SIGTERM");
          }),
      ),
    );
    rmSync(this.#dir, { recursive: true, force: true });
  }
}

describe("sync guard, on a cluster whose third server keeps the default sync interval", () => {
  let cluster: ConfiguredCluster;
  const r3 = { replicas: 3, maxAgeMs: 600_000, duplicateWindowMs: 60_000 };
  beforeAll(async () => {
    cluster = await ConfiguredCluster.start([true, true, false]);
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
  });

  it("refuses a clustered deployment it cannot verify: no monitoring URLs", async () => {
    const subjects = subjectCatalogue(uniqueName("g"));
    const error = await refusal(options(cluster.url, subjects, { stream: r3 }));
    expect(error).toBeInstanceOf(NatsSyncError);
    expect(error).toMatchObject({ code: "NATS_SYNC_UNSAFE", guard: "nats-sync", setting: "sync_interval" });
    expect(error.message).toMatch(
      new RegExp(
        `^cannot verify that clustered servers (guard-n\\d, ){2}guard-n\\d holding stream ${subjects.stream} sync every write: list their monitoring URLs in NATS_MONITOR_URL \\(for development only, TOOLGATE_UNSAFE_ALLOW=nats-sync starts anyway\\)$`,
      ),
    );
  });

  it("refuses the server that does not sync every write, naming it", async () => {
    const subjects = subjectCatalogue(uniqueName("g"));
    const error = await refusal(options(cluster.url, subjects, { stream: r3, monitorUrls: cluster.monitorUrls }));
    expect(error).toBeInstanceOf(NatsSyncError);
    expect(error.message).toBe(
      `nats-server guard-n3 (${cluster.monitorUrls[2]}) syncs to disk every 2 min, not on every write: set jetstream { sync_interval: always } on every server (for development only, TOOLGATE_UNSAFE_ALLOW=nats-sync starts anyway)`,
    );
  });

  it("refuses a monitoring URL that does not answer", async () => {
    const subjects = subjectCatalogue(uniqueName("g"));
    const closed = `http://127.0.0.1:${await freePort()}`;
    const error = await refusal(options(cluster.url, subjects, { stream: r3, monitorUrls: [closed] }));
    expect(error).toBeInstanceOf(NatsSyncError);
    expect(error.message).toMatch(new RegExp(`^cannot read ${closed}/varz to verify that the server syncs every write: `));
  });

  it("passes with the override, and then refuses a replica count that differs from the stream's", async () => {
    const subjects = subjectCatalogue(uniqueName("g"));
    const allowed: NatsRefusal[] = [];
    const bus = await NatsEventBus.connect(
      options(cluster.url, subjects, { stream: r3, monitorUrls: cluster.monitorUrls, allowUnsafe: (r) => allowed.push(r) > 0 }),
    );
    await bus.close();
    expect(allowed.map((r) => r.message.split(" (")[0])).toEqual(["nats-server guard-n3"]);
    try {
      const error = await refusal(options(cluster.url, subjects, { allowUnsafe: (r) => r.guard === "nats-sync", monitorUrls: cluster.monitorUrls }));
      expect(error).toBeInstanceOf(StreamSettingsError);
      expect(error.message).toMatch(new RegExp(`^stream ${subjects.stream} has 3 replica\\(s\\) but STREAM_REPLICAS is 1: `));
    } finally {
      await deleteStream(cluster.url, subjects.stream);
    }
  });
});
