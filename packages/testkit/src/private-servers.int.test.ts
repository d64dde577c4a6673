import { connect } from "@nats-io/transport-node";
import { MongoClient } from "mongodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { PrivateFerretDb, PrivateNats, PrivateNatsCluster } from "./private-servers.js";
import { waitFor } from "./wait-for.js";

let nats: PrivateNats;
let ferret: PrivateFerretDb;

beforeAll(async () => {
  [nats, ferret] = await Promise.all([PrivateNats.start(), PrivateFerretDb.start()]);
});
afterAll(async () => {
  await Promise.all([nats?.stop(), ferret?.stop()]);
});

describe("private servers", () => {
  it("a NATS server of one's own keeps its JetStream data across a kill and a restart", async () => {
    const nc = await connect({ servers: nats.url, reconnectTimeWait: 50, maxReconnectAttempts: -1 });
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: "PRIVATE", subjects: ["private.>"] });
    await nats.kill();
    expect(nats.running).toBe(false);
    await nats.start();
    // The client reconnects by itself (once JetStream has recovered its store); the stream is still there.
    const info = await waitFor(() => jsm.streams.info("PRIVATE").catch(() => undefined), { timeoutMs: 20_000, description: "the stream after the restart" });
    expect(info.config.name).toBe("PRIVATE");
    await nc.close();
  });

  it("a NATS server of one's own is the project's build", async () => {
    const varz = (await (await fetch(`http://127.0.0.1:${nats.httpPort}/varz`)).json()) as { version: string };
    const [major, minor, patch] = varz.version.split(".").map(Number);
    expect(major! * 1e6 + minor! * 1e3 + patch!).toBeGreaterThanOrEqual(2_012_003);
  });

  it("a paused FerretDB answers nothing until it is resumed", async () => {
    const client = await new MongoClient(ferret.url, { serverSelectionTimeoutMS: 10_000 }).connect();
    const things = client.db("private").collection<{ _id: string }>("things");
    await things.insertOne({ _id: "a" });
    ferret.pause();
    const pending = things.insertOne({ _id: "b" }, { timeoutMS: 30_000 });
    const answered = await Promise.race([pending.then(() => "answered"), new Promise((resolve) => setTimeout(() => resolve("silent"), 500))]);
    expect(answered).toBe("silent");
    ferret.resume();
    await pending;
    expect(await things.countDocuments()).toBe(2);
    await client.close();
  });
});

describe("a private NATS cluster", () => {
  let cluster: PrivateNatsCluster;
  beforeAll(async () => {
    cluster = await PrivateNatsCluster.start();
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
  });

  it("runs every node with a per-write fsync, as production clusters must", async () => {
    for (const node of cluster.nodes) {
      const jsz = (await (await fetch(`http://127.0.0.1:${node.httpPort}/jsz`)).json()) as { config: { sync_always?: boolean } };
      expect(jsz.config.sync_always).toBe(true);
    }
  });

  it("keeps an R3 stream writable when its leader is killed, and the node catches up when it returns", async () => {
    const nc = await connect({ servers: cluster.urls.split(","), reconnectTimeWait: 50, maxReconnectAttempts: -1 });
    try {
      const jsm = await jetstreamManager(nc);
      await jsm.streams.add({ name: "CLUSTERED", subjects: ["clustered.>"], num_replicas: 3 });
      const js = jetstream(nc, { timeout: 5_000 });
      await js.publish("clustered.a", "1", { msgID: "a" });
      const leader = await cluster.streamLeader("CLUSTERED");
      await leader.kill();
      // A new leader is elected among the two others; the stream takes writes again.
      const next = await cluster.streamLeader("CLUSTERED", 20_000);
      expect(next).not.toBe(leader);
      await waitFor(() => js.publish("clustered.b", "2", { msgID: "b" }).catch(() => undefined), {
        timeoutMs: 20_000,
        description: "a write after the leader's loss",
      });
      await cluster.restart(leader);
      // The leader sees the returned node as current at its next heartbeat from it.
      const info = await waitFor(
        async () => {
          const seen = await jsm.streams.info("CLUSTERED");
          return seen.cluster?.replicas?.length === 2 && seen.cluster.replicas.every((r) => r.current) && seen;
        },
        { timeoutMs: 20_000, description: "both followers current" },
      );
      expect(info.state.messages).toBe(2);
    } finally {
      await nc.close();
    }
  }, 90_000);

  it("a paused node answers nothing until it is resumed", async () => {
    const node = cluster.nodes[2]!;
    node.pause();
    expect(node.paused).toBe(true);
    const answered = await fetch(`http://127.0.0.1:${node.httpPort}/healthz`, { signal: AbortSignal.timeout(500) }).then(
      () => "answered",
      () => "silent",
    );
    expect(answered).toBe("silent");
    node.resume();
    await node.healthy();
    expect(node.paused).toBe(false);
  }, 60_000);
});
