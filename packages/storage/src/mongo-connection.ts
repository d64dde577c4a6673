import { MongoClient } from "mongodb";

export interface MongoConnectionOptions {
  url: string;
  /** Shown in the server's logs. */
  appName: string;
  /** Operations in flight at once from this process; excess operations queue in the driver. */
  maxPoolSize: number;
  /** Emit the driver's command events (for counting what a service sends). */
  monitorCommands?: boolean;
}

/**
 * Connects with journaled, acknowledged writes (`w: 1, j: true`) and retryable writes off: retries are
 * decided by the idempotency protocol, never silently by the driver.
 */
export async function connectMongo(options: MongoConnectionOptions): Promise<MongoClient> {
  const client = new MongoClient(options.url, {
    appName: options.appName,
    maxPoolSize: options.maxPoolSize,
    writeConcern: { w: 1, journal: true },
    retryWrites: false,
    serverSelectionTimeoutMS: 10_000,
    monitorCommands: options.monitorCommands ?? false,
  });
  await client.connect();
  return client;
}
