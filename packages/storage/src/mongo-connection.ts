import { MongoClient } from "mongodb";
import { writeConcernRefusal, type WriteConcernError } from "./write-concern-guard.js";

export interface MongoConnectionOptions {
  url: string;
  /** Shown in the server's logs. */
  appName: string;
  /** Operations in flight at once from this process; excess operations queue in the driver. */
  maxPoolSize: number;
  /**
   * Longest a connection may wait for the server to read a command or answer it before the command fails with
   * a network error (default 60 s: every command a service sends is short). A server that stopped answering
   * then costs its callers an error, never a wait without end.
   */
  socketTimeoutMS?: number;
  /** Emit the driver's command events (for counting what a service sends). */
  monitorCommands?: boolean;
  /** Asked when the write concern guard refuses; true connects anyway (the caller logs why). */
  allowUnsafe?: (refusal: WriteConcernError) => boolean;
}

const DEFAULT_SOCKET_TIMEOUT_MS = 60_000;

/**
 * Connects with majority, journaled writes (`w: "majority", j: true`: a standalone MongoDB journals on itself;
 * FerretDB ignores write concerns and answers once PostgreSQL has committed) and retryable writes off: retries are decided by the idempotency protocol, never
 * silently by the driver. Throws `WriteConcernError` when the effective write concern (the URL can weaken it)
 * is weaker than the deployment supports, unless `allowUnsafe` says otherwise.
 *
 * Every command is bounded by `socketTimeoutMS`. The driver (7.8, patched: see patches/README.md) then fails a
 * command whose connection closed while its write waited for the socket to drain; unpatched, that command and
 * every caller queued behind it waited forever after a database restart.
 */
export async function connectMongo(options: MongoConnectionOptions): Promise<MongoClient> {
  const client = new MongoClient(options.url, {
    appName: options.appName,
    maxPoolSize: options.maxPoolSize,
    writeConcern: { w: "majority", journal: true },
    retryWrites: false,
    serverSelectionTimeoutMS: 10_000,
    socketTimeoutMS: options.socketTimeoutMS ?? DEFAULT_SOCKET_TIMEOUT_MS,
    monitorCommands: options.monitorCommands ?? false,
  });
  await client.connect();
  const refusal = await writeConcernRefusal(client).catch(async (error: unknown) => {
    await client.close();
    throw error;
  });
  if (refusal && !options.allowUnsafe?.(refusal)) {
    await client.close();
    throw refusal;
  }
  return client;
}
