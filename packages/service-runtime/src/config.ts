import { hostname } from "node:os";
import { z } from "zod";
import { parseTrustedKey } from "@toolgate/contracts";
import { TRACE_SAMPLERS, type TracingOptions } from "@toolgate/telemetry";
import { UNSAFE_GUARDS } from "./start-up-guards.js";

const TRACES_EXPORTERS = ["none", "console", "otlp"] as const;
const OTLP_PROTOCOLS = ["http/protobuf", "http/json"] as const;

/** A deploy that cannot start: the message names each bad variable, never its value. */
export class ConfigError extends Error {
  readonly code = "INVALID_CONFIG";
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  ${problems.join("\n  ")}`);
    this.name = "ConfigError";
  }
}

const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

/** Environment variables every service reads (names are the documented configuration surface). */
export const baseEnvShape = {
  NATS_URL: z.string().min(1).default("nats://127.0.0.1:4222"),
  /**
   * This service's NATS identity: the nkey seed (`SU…`) whose public key the server's configuration lists with the
   * service's subject permissions (`toolgate-nats-auth`). A secret; without it the connection is anonymous, which
   * only a development server admits.
   */
  NATS_NKEY_SEED: z
    .string()
    .regex(/^SU[A-Z2-7]{56}$/, "an nkey user seed (SU…)")
    .optional(),
  /**
   * A PEM file with the CA that signed the NATS servers' certificates: the connection then requires TLS and
   * verifies the server against this CA (`infra/nats/make-tls.sh` creates one; docker-compose runs with it).
   */
  NATS_TLS_CA: z.string().min(1).optional(),
  /**
   * Monitoring URLs of the NATS servers (`http://host:8222`, comma-separated): the only place a client can read
   * whether a server syncs every write. Required when the servers are clustered.
   */
  NATS_MONITOR_URL: listEnv()
    .pipe(z.array(z.url({ protocol: /^https?$/ })))
    .default([]),
  /** Start-up guards to pass with a warning instead of refusing to start: for development only. */
  TOOLGATE_UNSAFE_ALLOW: listEnv()
    .pipe(z.array(z.enum(UNSAFE_GUARDS)))
    .default([]),
  /**
   * This service's Ed25519 event signing key (PKCS#8 PEM or base64 DER): every event it publishes carries a
   * signature its consumers check. A secret, never logged; `./infra/generate-env.sh` creates one per service.
   */
  EVENT_SIGNING_KEY: z.string().min(40).optional(),
  /**
   * The public keys trusted to sign events, each for one role: `<role>:<base64 DER SPKI>`, comma-separated. List
   * the old and the new key of a role while it rotates. An event is acted on only when a key of its owner's role
   * signed it.
   */
  EVENT_TRUSTED_KEYS: listEnv()
    .transform((entries, ctx) => {
      try {
        return entries.map(parseTrustedKey);
      } catch (error) {
        ctx.addIssue({ code: "custom", message: (error as Error).message });
        return z.NEVER;
      }
    })
    .default([]),
  MONGO_URL: z.string().startsWith("mongodb").default("mongodb://127.0.0.1:27017"),
  MONGO_DB: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,63}$/)
    .default("toolgate"),
  MONGO_MAX_POOL: int(1, 500).default(10),
  TOOLGATE_SUBJECT_PREFIX: z
    .string()
    .regex(/^[a-z][a-z0-9_-]{0,31}$/)
    .default("toolgate"),
  STREAM_REPLICAS: int(1, 5).default(1),
  STREAM_MAX_AGE_MS: int(60_000, 365 * 24 * 3_600_000).default(7 * 24 * 3_600_000),
  STREAM_DUPLICATE_WINDOW_MS: int(1_000, 24 * 3_600_000).default(120_000),
  MAX_EVENT_BYTES: int(4_096, 64 * 1024 * 1024).default(1024 * 1024),
  /**
   * How long a message a process was given stays its own without word from it. Live processes report the
   * messages they hold in progress every third of this, so it bounds how long a dead process's messages wait
   * before another replica gets them, not how long a handler may take.
   */
  BUS_ACK_WAIT_MS: int(1_000, 600_000).default(3_000),
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  INSTANCE_ID: z
    .string()
    .regex(/^[A-Za-z0-9_.-]{1,64}$/)
    .default(`${hostname()}-${process.pid}`.replace(/[^A-Za-z0-9_.-]/g, "_")),
  /** Where spans go: `none`, `console` or `otlp` (see {@link tracingOptions}); the older `TRACES_EXPORTER` is its alias. */
  OTEL_TRACES_EXPORTER: z.enum(TRACES_EXPORTERS).optional(),
  TRACES_EXPORTER: z.enum(TRACES_EXPORTERS).optional(),
  /** Base URL of an OTLP/HTTP receiver (`/v1/traces` is appended); setting it alone turns the `otlp` exporter on. */
  OTEL_EXPORTER_OTLP_ENDPOINT: z.url({ protocol: /^https?$/ }).optional(),
  /** The full traces URL of an OTLP/HTTP receiver (used as it is); wins over `OTEL_EXPORTER_OTLP_ENDPOINT`. */
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: z.url({ protocol: /^https?$/ }).optional(),
  OTEL_EXPORTER_OTLP_PROTOCOL: z.enum(OTLP_PROTOCOLS, { message: "http/protobuf or http/json (grpc is not supported)" }).optional(),
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: z.enum(OTLP_PROTOCOLS, { message: "http/protobuf or http/json (grpc is not supported)" }).optional(),
  OTEL_SERVICE_NAME: z.string().min(1).max(256).optional(),
  /** `key=value` pairs, comma-separated, values percent-encoded (the specification's format). */
  OTEL_RESOURCE_ATTRIBUTES: listEnv()
    .transform((pairs, ctx) => {
      const attributes: Record<string, string> = {};
      for (const pair of pairs) {
        const at = pair.indexOf("=");
        if (at <= 0) {
          ctx.addIssue({ code: "custom", message: "key=value pairs, comma-separated" });
          return z.NEVER;
        }
        try {
          attributes[pair.slice(0, at).trim()] = decodeURIComponent(pair.slice(at + 1).trim());
        } catch {
          ctx.addIssue({ code: "custom", message: "values must be percent-encoded" });
          return z.NEVER;
        }
      }
      return attributes;
    })
    .optional(),
  OTEL_TRACES_SAMPLER: z.enum(TRACE_SAMPLERS).default("parentbased_always_on"),
  /** The ratio of the `traceidratio` samplers, 0 to 1. */
  OTEL_TRACES_SAMPLER_ARG: z.coerce.number().min(0).max(1).optional(),
  /**
   * Spans per export at most (the batch span processor's). Toolgate's default is smaller than the specification's
   * 512: a service ends hundreds of spans a second, and serializing 512 at once held its event loop for ~10 ms and
   * cost more CPU per span than small batches do.
   */
  OTEL_BSP_MAX_EXPORT_BATCH_SIZE: int(1, 2_048).default(64),
  /** Milliseconds a span waits for its batch to fill at most; default 200 (the specification's is 5000). */
  OTEL_BSP_SCHEDULE_DELAY: int(1, 60_000).default(200),
  /** `true` turns tracing off whatever else is set (the specification's switch). */
  OTEL_SDK_DISABLED: z.enum(["true", "false"]).optional(),
  /**
   * With spans: `true` gives every NATS hop its producer and consumer spans (messaging conventions), about a
   * dozen more spans per call; by default a call's trace holds its steps, each the consumer span of its message.
   */
  TOOLGATE_TRACE_HOPS: z.enum(["true", "false"]).default("false"),
  /**
   * Spans (database commands, messages handled, publishes) kept for a benchmark to read with SIGUSR2; 0 keeps
   * none. Counters are always kept.
   */
  STATS_TRACE_CAPACITY: int(0, 1_000_000).default(0),
  /**
   * A bearer token `GET /metrics` then requires (Prometheus's `authorization` scrape setting). Unset, the
   * endpoint is open: it holds only counts by tool, code and reason. A secret: never logged.
   */
  METRICS_TOKEN: z.string().min(16).optional(),
};

export const BaseEnvSchema = z.object(baseEnvShape);
export type BaseConfig = z.infer<typeof BaseEnvSchema>;

/**
 * The tracing set-up the `OTEL_*` variables describe. The exporter is `OTEL_TRACES_EXPORTER` (or
 * `TRACES_EXPORTER`); unset, it is `otlp` when an OTLP endpoint is set and `none` otherwise — unlike the
 * specification's default, a deployment without a collector makes no spans at all. `otlp` without an endpoint
 * sends to the specification's default, `http://localhost:4318/v1/traces`, as protobuf unless the protocol says JSON.
 */
export function tracingOptions(service: string, config: BaseConfig): TracingOptions {
  const endpoint =
    config.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ??
    (config.OTEL_EXPORTER_OTLP_ENDPOINT ? `${config.OTEL_EXPORTER_OTLP_ENDPOINT.replace(/\/+$/, "")}/v1/traces` : undefined);
  const exporter = config.OTEL_SDK_DISABLED === "true" ? "none" : (config.OTEL_TRACES_EXPORTER ?? config.TRACES_EXPORTER ?? (endpoint ? "otlp" : "none"));
  return {
    service,
    exporter,
    ...(exporter === "otlp"
      ? {
          otlp: {
            url: endpoint ?? "http://localhost:4318/v1/traces",
            protocol: config.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? config.OTEL_EXPORTER_OTLP_PROTOCOL ?? "http/protobuf",
          },
        }
      : {}),
    ...(config.OTEL_SERVICE_NAME ? { serviceName: config.OTEL_SERVICE_NAME } : {}),
    instanceId: config.INSTANCE_ID,
    ...(config.OTEL_RESOURCE_ATTRIBUTES ? { resourceAttributes: config.OTEL_RESOURCE_ATTRIBUTES } : {}),
    sampler: { name: config.OTEL_TRACES_SAMPLER, arg: config.OTEL_TRACES_SAMPLER_ARG },
    batch: { maxExportBatchSize: config.OTEL_BSP_MAX_EXPORT_BATCH_SIZE, scheduledDelayMillis: config.OTEL_BSP_SCHEDULE_DELAY },
  };
}

/**
 * Parses the process environment once, at start-up, with the service's schema; throws {@link ConfigError}
 * so a bad deploy fails immediately instead of at the first message.
 */
export function parseEnv<S extends z.ZodType>(schema: S, env: Record<string, string | undefined>): z.infer<S> {
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    throw new ConfigError(parsed.error.issues.map((i) => `${i.path.join(".") || "(env)"}: ${i.message}`));
  }
  return parsed.data;
}

/** Parses a JSON-valued variable with a schema (e.g. a list of API keys); used inside env schemas. */
export function jsonEnv<S extends z.ZodType>(schema: S) {
  return z
    .string()
    .transform((text, ctx) => {
      try {
        return JSON.parse(text) as unknown;
      } catch {
        ctx.addIssue({ code: "custom", message: "must be JSON" });
        return z.NEVER;
      }
    })
    .pipe(schema);
}

/** A comma-separated list variable. */
export function listEnv() {
  return z.string().transform((text) =>
    text
      .split(",")
      .map((s) => s.trim())
      .filter((s) => s.length > 0),
  );
}
