import { NatsEventBus } from "@toolgate/bus";
import { subjectCatalogue, type SubjectCatalogue } from "@toolgate/contracts";
import { connectMongo } from "@toolgate/storage";
import type { Logger } from "@toolgate/telemetry";
import type { Db, MongoClient } from "mongodb";
import type { BaseConfig } from "./config.js";

/** The connections a service's composition root builds from its configuration. */
export interface Infrastructure {
  bus: NatsEventBus;
  subjects: SubjectCatalogue;
  mongo: MongoClient;
  db: Db;
  /** Drains NATS and closes MongoDB; call after the workers stopped. */
  close(): Promise<void>;
}

/** Connects to NATS (creating the event stream if needed) and MongoDB. Throws if either is unreachable. */
export async function connectInfrastructure(service: string, config: BaseConfig, logger: Logger): Promise<Infrastructure> {
  const subjects = subjectCatalogue(config.TOOLGATE_SUBJECT_PREFIX);
  const bus = await NatsEventBus.connect({
    servers: config.NATS_URL,
    name: `toolgate-${service}-${config.INSTANCE_ID}`,
    subjects,
    maxEventBytes: config.MAX_EVENT_BYTES,
    stream: { replicas: config.STREAM_REPLICAS, maxAgeMs: config.STREAM_MAX_AGE_MS, duplicateWindowMs: config.STREAM_DUPLICATE_WINDOW_MS },
    logger,
  });
  let mongo: MongoClient;
  try {
    mongo = await connectMongo({ url: config.MONGO_URL, appName: `toolgate-${service}`, maxPoolSize: config.MONGO_MAX_POOL });
  } catch (error) {
    await bus.close();
    throw error;
  }
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
