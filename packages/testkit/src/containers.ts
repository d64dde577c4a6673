import { MongoDBContainer } from "@testcontainers/mongodb";
import { GenericContainer, Wait } from "testcontainers";
import type { InfraTeardown, TestInfra } from "./infra.js";

/**
 * Starts NATS (JetStream, the version infra/dev.sh builds, fsync on every write) and a MongoDB replica set in containers, waiting for
 * real readiness (the server's own log line / a replica-set primary), not for "process started".
 */
export async function startContainers(): Promise<{ infra: TestInfra; teardown: InfraTeardown }> {
  const [nats, mongo] = await Promise.all([
    new GenericContainer("nats:2.15.2-alpine")
      .withCommand(["-js", "--sync_interval", "always"])
      .withExposedPorts(4222)
      .withWaitStrategy(Wait.forLogMessage(/Server is ready/))
      .start(),
    new MongoDBContainer("mongo:8.0").start(),
  ]);
  return {
    infra: {
      natsUrl: `nats://${nats.getHost()}:${nats.getMappedPort(4222)}`,
      mongoUrl: `${mongo.getConnectionString()}?directConnection=true`,
    },
    teardown: async () => {
      await Promise.all([nats.stop(), mongo.stop()]);
    },
  };
}
