import { existsSync } from "node:fs";

/** Where the tests' real servers are. */
export interface TestInfra {
  natsUrl: string;
  mongoUrl: string;
}

/** Stops whatever {@link startInfra} started (nothing when the environment supplied the servers). */
export type InfraTeardown = () => Promise<void>;

/**
 * Finds the servers tests run against: the URLs in `TOOLGATE_TEST_NATS_URL` / `TOOLGATE_TEST_MONGO_URL` when
 * set (infra/dev.sh sets them), otherwise fresh `nats` and `mongo` containers when a Docker engine answers.
 * Throws with instructions when neither is available; tests never fall back to mocks.
 */
export async function startInfra(env: NodeJS.ProcessEnv = process.env): Promise<{ infra: TestInfra; teardown: InfraTeardown }> {
  const natsUrl = env.TOOLGATE_TEST_NATS_URL;
  const mongoUrl = env.TOOLGATE_TEST_MONGO_URL;
  if (natsUrl && mongoUrl) return { infra: { natsUrl, mongoUrl }, teardown: async () => {} };
  if (!dockerEngineLikely(env)) {
    throw new Error(
      "No test servers: set TOOLGATE_TEST_NATS_URL and TOOLGATE_TEST_MONGO_URL (./infra/dev.sh test does), or run where a Docker engine is available for testcontainers.",
    );
  }
  const { startContainers } = await import("./containers.js");
  return startContainers();
}

function dockerEngineLikely(env: NodeJS.ProcessEnv): boolean {
  return Boolean(env.DOCKER_HOST) || existsSync("/var/run/docker.sock");
}
