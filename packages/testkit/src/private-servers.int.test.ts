import { connect } from "@nats-io/transport-node";
import { MongoClient } from "mongodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PrivateFerretDb, PrivateNats } from "./private-servers.js";
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
    const { jetstreamManager } = await import("@nats-io/jetstream");
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
