import type { MongoClient, WriteConcern } from "mongodb";

/** The start-up guard on MongoDB's write concern, by the name `TOOLGATE_UNSAFE_ALLOW` lists to override it. */
export const MONGO_GUARDS = ["mongo-write-concern"] as const;
export type MongoGuard = (typeof MONGO_GUARDS)[number];

/** What kind of deployment answered `hello`: only a replica set (or a sharded cluster over them) has a majority. */
export type MongoTopology = "replica-set" | "sharded" | "standalone";

/**
 * The client's write concern is weaker than the deployment can give: on a replica set or sharded cluster,
 * `w: "majority"` with `j: true`; on a standalone server (FerretDB is one), `w` ≥ 1 with `j: true`.
 */
export class WriteConcernError extends Error {
  readonly code = "MONGO_WRITE_CONCERN_UNSAFE";
  readonly guard = "mongo-write-concern";
  readonly setting = "MONGO_URL write concern";
  readonly overridable = true;
  constructor(
    readonly topology: MongoTopology,
    readonly writeConcern: { w?: unknown; journal?: unknown },
    problem: string,
  ) {
    super(`${problem} (for development only, TOOLGATE_UNSAFE_ALLOW=mongo-write-concern starts anyway)`);
    this.name = "WriteConcernError";
  }
}

/**
 * The refusal, if any, for `writeConcern` on a deployment of `topology`. Journaling is required everywhere:
 * an acknowledged idempotency claim must survive the server's crash, or a side effect can run twice.
 */
export function writeConcernProblem(topology: MongoTopology, writeConcern: { w?: unknown; journal?: unknown } | undefined): WriteConcernError | undefined {
  const w = writeConcern?.w;
  const journal = writeConcern?.journal;
  const shown = `w: ${JSON.stringify(w ?? "default")}, j: ${JSON.stringify(journal ?? "default")}`;
  const where = topology === "standalone" ? "a standalone server" : topology === "sharded" ? "a sharded cluster" : "a replica set";
  if (topology !== "standalone" && w !== "majority") {
    return new WriteConcernError(
      topology,
      { w, journal },
      `write concern ${shown} on ${where} can lose acknowledged writes on failover: use w: "majority", j: true`,
    );
  }
  if (topology === "standalone" && !(w === "majority" || (typeof w === "number" && w >= 1))) {
    return new WriteConcernError(topology, { w, journal }, `write concern ${shown} on ${where} does not wait for the write: use w: 1 or "majority", j: true`);
  }
  if (journal !== true) {
    return new WriteConcernError(topology, { w, journal }, `write concern ${shown} on ${where} acknowledges writes before they are journaled: use j: true`);
  }
  return undefined;
}

/** Asks the server what it is (one `hello`) and checks the client's effective write concern against it. */
export async function writeConcernRefusal(client: MongoClient): Promise<WriteConcernError | undefined> {
  const hello = await client.db("admin").command({ hello: 1 });
  const topology: MongoTopology = typeof hello.setName === "string" ? "replica-set" : hello.msg === "isdbgrid" ? "sharded" : "standalone";
  const writeConcern: WriteConcern | undefined = client.options.writeConcern;
  return writeConcernProblem(topology, writeConcern);
}
