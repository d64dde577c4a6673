import { execFile } from "node:child_process";
import { promisify } from "node:util";

const run = promisify(execFile);

/** PostgreSQL's counters for one table FerretDB keeps a collection in. */
export interface TableStats {
  /** `<database>.<collection>` as the services name it. */
  collection: string;
  seqScans: number;
  seqRowsRead: number;
  indexScans: number;
  inserted: number;
  updated: number;
  rows: number;
}

/**
 * The counters of every table of the Mongo databases whose names start with `databasePrefix`, read with `psql`
 * from the PostgreSQL database FerretDB stores them in (one schema per Mongo database, one table per
 * collection named `<collection>_<hash>`). Undefined when PostgreSQL cannot be asked (no psql, no access):
 * the benchmark then says so instead of guessing.
 */
export async function readTableStats(pgUrl: string, databasePrefix: string): Promise<TableStats[] | undefined> {
  if (!/^[a-z0-9_]+$/.test(databasePrefix)) throw new TypeError(`unexpected database prefix ${databasePrefix}`);
  const sql =
    "SELECT schemaname, relname, seq_scan, seq_tup_read, coalesce(idx_scan, 0), n_tup_ins, n_tup_upd, n_live_tup " +
    `FROM pg_stat_user_tables WHERE schemaname LIKE '${databasePrefix}%' AND relname <> '_ferretdb_database_metadata'`;
  let stdout: string;
  try {
    ({ stdout } = await run("psql", [pgUrl, "-X", "-q", "-t", "-A", "-F", "|", "-c", sql], { timeout: 10_000 }));
  } catch {
    return undefined;
  }
  return stdout
    .split("\n")
    .filter((line) => line.includes("|"))
    .map((line) => {
      const [schema, table, seqScans, seqRowsRead, indexScans, inserted, updated, rows] = line.split("|");
      return {
        collection: `${schema}.${(table ?? "").replace(/_[0-9a-f]{8}$/, "")}`,
        seqScans: Number(seqScans),
        seqRowsRead: Number(seqRowsRead),
        indexScans: Number(indexScans),
        inserted: Number(inserted),
        updated: Number(updated),
        rows: Number(rows),
      };
    });
}

/** What happened to each table between two readings (tables created in between count from zero). */
export function tableDeltas(before: readonly TableStats[], after: readonly TableStats[]): TableStats[] {
  const earlier = new Map(before.map((t) => [t.collection, t]));
  return after.map((t) => {
    const b = earlier.get(t.collection);
    return {
      collection: t.collection,
      seqScans: t.seqScans - (b?.seqScans ?? 0),
      seqRowsRead: t.seqRowsRead - (b?.seqRowsRead ?? 0),
      indexScans: t.indexScans - (b?.indexScans ?? 0),
      inserted: t.inserted - (b?.inserted ?? 0),
      updated: t.updated - (b?.updated ?? 0),
      rows: t.rows,
    };
  });
}
