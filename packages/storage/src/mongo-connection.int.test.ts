import { createServer, connect as connectTcp, type Server, type Socket } from "node:net";
import { testInfra, uniqueName } from "@toolgate/testkit";
import type { MongoClient } from "mongodb";
import { afterEach, describe, expect, it } from "vitest";
import { connectMongo } from "./mongo-connection.js";

/**
 * A TCP proxy in front of the test server whose client side can stop reading: what a server that stops
 * answering (paused, wedged, gone without a FIN) looks like from the driver.
 */
class StallingProxy {
  readonly #server: Server;
  readonly #clients = new Set<Socket>();

  private constructor(server: Server) {
    this.#server = server;
  }

  static async start(target: URL): Promise<StallingProxy> {
    const proxy: StallingProxy = new StallingProxy(
      createServer((client) => {
        proxy.#clients.add(client);
        const upstream = connectTcp(Number(target.port), target.hostname);
        client.pipe(upstream).pipe(client);
        const end = () => {
          proxy.#clients.delete(client);
          client.destroy();
          upstream.destroy();
        };
        client.on("error", end).on("close", end);
        upstream.on("error", end).on("close", end);
      }),
    );
    await new Promise<void>((resolve) => proxy.#server.listen(0, "127.0.0.1", resolve));
    return proxy;
  }

  get url(): string {
    const address = this.#server.address();
    if (typeof address !== "object" || !address) throw new Error("proxy not listening");
    return `mongodb://127.0.0.1:${address.port}/?directConnection=true`;
  }

  /** Stops reading what the clients send: their writes back up until the kernel buffers are full. */
  stall(): void {
    for (const client of this.#clients) {
      client.unpipe();
      client.pause();
    }
  }

  async close(): Promise<void> {
    for (const client of this.#clients) client.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

describe("connectMongo", () => {
  let proxy: StallingProxy | undefined;
  let client: MongoClient | undefined;
  afterEach(async () => {
    await client?.close(true);
    await proxy?.close();
  });

  it("fails a command whose write is stuck behind a server that stopped reading, instead of waiting forever", async () => {
    proxy = await StallingProxy.start(new URL(testInfra().mongoUrl));
    client = await connectMongo({ url: proxy.url, appName: "stalled-write-test", maxPoolSize: 2, socketTimeoutMS: 500 });
    const collection = client.db(uniqueName("tg_stall_")).collection<{ _id: string; blob: string }>("docs");
    proxy.stall();
    // 3 × 5 MB in one command: more than the loopback socket buffers hold, so the driver waits for `drain`.
    // The socket timeout then destroys the socket without an error, which emits neither `drain` nor `error`.
    const blob = "x".repeat(5 * 1024 * 1024);
    const insert = collection.insertMany([0, 1, 2].map((n) => ({ _id: `doc-${n}`, blob })));
    await expect(insert).rejects.toMatchObject({ name: expect.stringMatching(/^Mongo(Bulk)?(Network|NetworkTimeout|BulkWrite)Error$/) });
  }, 20_000);
});
