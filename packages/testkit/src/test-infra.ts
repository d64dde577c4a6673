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
