import { NatsEventBus } from "@toolgate/bus";
import { subjectCatalogue, type SubjectCatalogue } from "@toolgate/contracts";
import { connectMongo } from "@toolgate/storage";
import { epochMicros, type Logger, type RuntimeStats } from "@toolgate/telemetry";
import type { Db, MongoClient } from "mongodb";
import type { BaseConfig } from "./config.js";
import { unsafeOverride } from "./start-up-guards.js";

/** The connections a service's composition root builds from its configuration. */
export interface Infrastructure {
  bus: NatsEventBus;
  subjects: SubjectCatalogue;
  mongo: MongoClient;
  db: Db;
  /** Drains NATS and closes MongoDB; call after the workers stopped. */
  close(): Promise<void>;
}

/**
 * Connects to NATS (creating the event stream if needed) and MongoDB, both counted in `stats` (database
 * commands by command, database and collection; publishes and deliveries by event type). Throws if either is
 * unreachable, and a start-up guard's refusal (`UnsafeSettingRefusal`) for an unsafe setting that
 * `TOOLGATE_UNSAFE_ALLOW` does not list.
 */
export async function connectInfrastructure(service: string, config: BaseConfig, context: { logger: Logger; stats: RuntimeStats }): Promise<Infrastructure> {
  const { logger, stats } = context;
  const allowUnsafe = unsafeOverride(config.TOOLGATE_UNSAFE_ALLOW, logger);
  const subjects = subjectCatalogue(config.TOOLGATE_SUBJECT_PREFIX);
  const bus = await NatsEventBus.connect({
    servers: config.NATS_URL,
    name: `toolgate-${service}-${config.INSTANCE_ID}`,
    ...(config.NATS_NKEY_SEED ? { nkeySeed: config.NATS_NKEY_SEED } : {}),
    ...(config.NATS_TLS_CA ? { tlsCaFile: config.NATS_TLS_CA } : {}),
    subjects,
    maxEventBytes: config.MAX_EVENT_BYTES,
    stream: { replicas: config.STREAM_REPLICAS, maxAgeMs: config.STREAM_MAX_AGE_MS, duplicateWindowMs: config.STREAM_DUPLICATE_WINDOW_MS },
    logger,
    stats,
    // Spans (and the async context that carries them) only when something exports them.
    traceSpans: config.TRACES_EXPORTER !== "none",
    monitorUrls: config.NATS_MONITOR_URL,
    allowUnsafe,
  });
  let mongo: MongoClient;
  try {
    mongo = await connectMongo({
      url: config.MONGO_URL,
      appName: `toolgate-${service}`,
      maxPoolSize: config.MONGO_MAX_POOL,
      monitorCommands: true,
      allowUnsafe,
    });
  } catch (error) {
    await bus.close();
    throw error;
  }
  countCommands(mongo, stats);
  logDatabaseReachability(mongo, logger);
  return {
    bus,
    subjects,
    mongo,
    db: mongo.db(config.MONGO_DB),
    async close() {
      await bus.close();
      await mongo.close();
    },
  };
}

/**
 * Logs each loss and return of the database once: the driver's monitor marks a server `Unknown` when its
 * heartbeat fails (a stopped, paused or unreachable server) and gives it its type back when one succeeds.
 */
function logDatabaseReachability(mongo: MongoClient, logger: Logger): void {
  let lostAt = 0;
  mongo.on("serverDescriptionChanged", (event) => {
    const was = event.previousDescription.type;
    const now = event.newDescription.type;
    if (now === "Unknown" && was !== "Unknown" && lostAt === 0) {
      lostAt = Date.now();
      logger.warn({ server: event.address, err: event.newDescription.error ?? undefined }, "database unreachable; operations fail until it is back");
    } else if (now !== "Unknown" && was === "Unknown" && lostAt > 0) {
      logger.warn({ server: event.address, down_ms: Date.now() - lostAt }, "database reachable again");
      lostAt = 0;
    }
  });
}

/** Counts every command the driver sends (`db.<command>.<database>.<collection>`) and, when tracing, its span. */
function countCommands(mongo: MongoClient, stats: RuntimeStats): void {
  const started = new Map<number, { name: string; at: number }>();
  mongo.on("commandStarted", (event) => {
    const target: unknown = (event.command as Record<string, unknown>)[event.commandName];
    const name = `db.${event.commandName}.${event.databaseName}${typeof target === "string" ? `.${target}` : ""}`;
    stats.add(name);
    if (stats.tracing) started.set(event.requestId, { name, at: epochMicros() });
  });
  const ended = (event: { requestId: number }): void => {
    const start = started.get(event.requestId);
    if (!start) return;
    started.delete(event.requestId);
    stats.record("db", start.name, start.at, epochMicros());
  };
  mongo.on("commandSucceeded", ended);
  mongo.on("commandFailed", (event) => {
    stats.add(`db.failed.${event.commandName}`);
    ended(event);
  });
}
