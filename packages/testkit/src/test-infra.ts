import { NatsEventBus, type NatsEventBusOptions } from "@toolgate/bus";
import type { SubjectCatalogue } from "@toolgate/contracts";
import { createLogger } from "@toolgate/telemetry";
import { MongoClient, type Db } from "mongodb";
import { inject } from "vitest";
import type { TestInfra } from "./infra.js";
import { uniqueName } from "./names.js";

/** The servers the global setup resolved for this test run. */
export function testInfra(): TestInfra {
  return inject("toolgateInfra");
}

/** A freshly named database on the test Mongo server; `dispose` drops it and closes the client. */
export async function testDatabase(prefix = "tg_test_"): Promise<{ client: MongoClient; db: Db; name: string; dispose(): Promise<void> }> {
  const client = new MongoClient(testInfra().mongoUrl);
  await client.connect();
  const name = uniqueName(prefix);
  const db = client.db(name);
  return {
    client,
    db,
    name,
    dispose: async () => {
      await db.dropDatabase().catch(() => undefined);
      await client.close();
    },
  };
}

/**
 * An event bus on the test NATS server with the settings integration tests share — one replica, events kept 10
 * minutes, a 60 s duplicate window, 64 KiB events, a silent logger — any of which `overrides` replace. The caller
 * closes it and deletes its stream.
 */
export function connectTestBus(name: string, subjects: SubjectCatalogue, overrides: Partial<NatsEventBusOptions> = {}): Promise<NatsEventBus> {
  return NatsEventBus.connect({
    servers: testInfra().natsUrl,
    name,
    subjects,
    maxEventBytes: 64 * 1024,
    stream: { replicas: 1, maxAgeMs: 10 * 60_000, duplicateWindowMs: 60_000 },
    logger: createLogger({ service: "test", level: "silent" }),
    ...overrides,
  });
}
