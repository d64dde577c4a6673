import { NatsEventBus, type ConsumerLag, type EventBus } from "@toolgate/bus";
import { eventSigner, eventTrust, ServiceNameSchema, subjectCatalogue, type EventSigner, type EventTrust, type SubjectCatalogue } from "@toolgate/contracts";
import { connectMongo } from "@toolgate/storage";
import { epochMicros, type Logger, type RuntimeStats, type ServiceMetrics, type Tracing } from "@toolgate/telemetry";
import type { Db, MongoClient } from "mongodb";
import type { BaseConfig } from "./config.js";
import { ConfigError } from "./config.js";
import { unsafeOverride, UnsignedEventsError, type UnsafeSettingRefusal } from "./start-up-guards.js";

/** The connections a service's composition root builds from its configuration. */
export interface Infrastructure {
  bus: NatsEventBus;
  subjects: SubjectCatalogue;
  mongo: MongoClient;
  db: Db;
  /** The keys trusted to sign events (EVENT_TRUSTED_KEYS), if configured. */
  trust: EventTrust | undefined;
  /** Drains NATS and closes MongoDB; call after the workers stopped. */
  close(): Promise<void>;
}

/**
 * Connects to NATS (creating the event stream if needed) and MongoDB, both counted in `stats` (database
 * commands by command, database and collection; publishes and deliveries by event type). Throws if either is
 * unreachable, and a start-up guard's refusal (`UnsafeSettingRefusal`) for an unsafe setting that
 * `TOOLGATE_UNSAFE_ALLOW` does not list.
 */
export async function connectInfrastructure(
  service: string,
  config: BaseConfig,
  context: { logger: Logger; stats: RuntimeStats; tracing?: Pick<Tracing, "spans" | "runs">; metrics?: ServiceMetrics },
): Promise<Infrastructure> {
  const { logger, stats } = context;
  const allowUnsafe = unsafeOverride(config.TOOLGATE_UNSAFE_ALLOW, logger);
  const subjects = subjectCatalogue(config.TOOLGATE_SUBJECT_PREFIX);
  const keys = eventKeys(service, config, allowUnsafe);
  const bus = await NatsEventBus.connect({
    ...keys,
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
    traceSpans: context.tracing?.spans ?? false,
    traceHops: config.TOOLGATE_TRACE_HOPS === "true",
    ...(context.tracing?.runs ? { runTraces: context.tracing.runs } : {}),
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
  if (context.metrics) exportConsumerLag(context.metrics, bus, logger);
  return {
    bus,
    subjects,
    mongo,
    db: mongo.db(config.MONGO_DB),
    trust: keys.trust,
    async close() {
      await bus.close();
      await mongo.close();
    },
  };
}

/**
 * The service's event signer and trust list from its configuration. A missing one is a start-up guard's refusal
 * (`unsigned-events`); a signing key that the trust list does not hold for this service's role is a
 * configuration error (its own events would be refused everywhere).
 */
function eventKeys(service: string, config: BaseConfig, allowUnsafe: (refusal: UnsafeSettingRefusal) => boolean): { signer?: EventSigner; trust?: EventTrust } {
  // A tool that connects like a service (a benchmark, a test) has no role: it signs nothing.
  const parsed = ServiceNameSchema.safeParse(service);
  const role = parsed.success ? parsed.data : undefined;
  if (!role && config.EVENT_SIGNING_KEY) throw new ConfigError([`EVENT_SIGNING_KEY: ${service} is not a service that publishes events`]);
  const refuse = (refusal: UnsignedEventsError): void => {
    if (!allowUnsafe(refusal)) throw refusal;
  };
  let signer: EventSigner | undefined;
  let trust: EventTrust | undefined;
  try {
    signer = config.EVENT_SIGNING_KEY && role ? eventSigner(config.EVENT_SIGNING_KEY, role) : undefined;
    trust = config.EVENT_TRUSTED_KEYS.length > 0 ? eventTrust(config.EVENT_TRUSTED_KEYS) : undefined;
  } catch (error) {
    throw new ConfigError([`EVENT_SIGNING_KEY / EVENT_TRUSTED_KEYS: ${(error as Error).message}`]);
  }
  if (!trust) refuse(new UnsignedEventsError("EVENT_TRUSTED_KEYS"));
  // Audit publishes nothing: it keeps signatures to verify them, and needs no key of its own.
  if (!signer && role !== undefined && role !== "audit") refuse(new UnsignedEventsError("EVENT_SIGNING_KEY"));
  if (signer && trust && trust.roleOf(signer.keyId) !== role) {
    throw new ConfigError([`EVENT_TRUSTED_KEYS: does not list this service's own key (${signer.keyId}) for ${role}`]);
  }
  return { ...(signer ? { signer } : {}), ...(trust ? { trust } : {}) };
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

/**
 * The backlog of each durable consumer this process works on, read from the server when scraped (one JetStream
 * API request per consumer, at the scrape's pace). A server that cannot be asked leaves the series out of that
 * scrape rather than failing it.
 */
function exportConsumerLag(metrics: ServiceMetrics, bus: EventBus, logger: Logger): void {
  let lag: { at: number; read: Promise<ConsumerLag[]> } | undefined;
  // One request per scrape, shared by the three gauges that read it.
  const read = (): Promise<ConsumerLag[]> => {
    if (!lag || Date.now() - lag.at > 1_000) {
      const consumers = bus.consumerLag().catch((error: unknown) => {
        logger.debug({ err: error }, "consumer lag not read for this scrape");
        return [];
      });
      lag = { at: Date.now(), read: consumers };
    }
    return lag.read;
  };
  const gauge = (name: string, help: string, pick: (l: ConsumerLag) => number): void => {
    metrics.gauge({
      name,
      help,
      labelNames: ["consumer"],
      async collect() {
        this.reset();
        for (const l of await read()) this.set({ consumer: l.consumer }, pick(l));
      },
    });
  };
  gauge("toolgate_consumer_pending_messages", "Messages under a durable consumer's filters not yet delivered", (l) => l.pending);
  gauge("toolgate_consumer_ack_pending_messages", "Messages a durable consumer delivered and has not had acknowledged", (l) => l.ackPending);
  gauge("toolgate_consumer_redelivered_messages", "Of those, messages delivered more than once", (l) => l.redelivered);
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
