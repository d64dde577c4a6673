import { createLogger, initTracing, RuntimeStats, ServiceMetrics, type Logger, type Tracing } from "@toolgate/telemetry";
import { tracingOptions, type BaseConfig } from "./config.js";
import { isUnsafeSettingRefusal } from "./start-up-guards.js";

/** A started service: how to stop it and what it serves. */
export interface RunningService {
  /** Stop taking work, finish or release in-flight work, then close connections. */
  stop(): Promise<void>;
  /** Port of the service's HTTP API, when it has one. */
  httpPort?: number;
}

export interface ServiceContext {
  logger: Logger;
  tracing: Tracing;
  /** Counters (and, if configured, spans) of this process, logged as one `stats` line on SIGUSR2. */
  stats: RuntimeStats;
  /** This process's Prometheus registry (default, bus and database metrics included), served at `GET /metrics`. */
  metrics: ServiceMetrics;
}

export interface RunServiceOptions {
  name: string;
  config: BaseConfig;
  start(context: ServiceContext): Promise<RunningService>;
  /** Longest a graceful stop may take before the process exits anyway. */
  stopTimeoutMs?: number;
}

/**
 * Runs one service process: logging, tracing, start-up, the `ready` log line (with the HTTP port), a `stats`
 * line on SIGUSR2, and a graceful stop on SIGTERM/SIGINT. A failure to start exits with code 1 (a start-up
 * guard's refusal logged as `refusing to start: <why>`); an unexpected rejection is logged,
 * never fatal, so that no single bad message can take a service down.
 */
export async function runService(options: RunServiceOptions): Promise<void> {
  const logger = createLogger({ service: options.name, level: options.config.LOG_LEVEL, instance: options.config.INSTANCE_ID });
  const tracing = initTracing(tracingOptions(options.name, options.config));
  const stats = new RuntimeStats({ traceCapacity: options.config.STATS_TRACE_CAPACITY });
  const metrics = new ServiceMetrics({
    service: options.name,
    stats,
    ...(options.config.METRICS_TOKEN === undefined ? {} : { token: options.config.METRICS_TOKEN }),
  });
  process.on("unhandledRejection", (reason) => logger.error({ err: reason }, "unhandled rejection"));
  // Start, ready and stop are always logged (unless silenced): supervisors and tests wait for `ready`.
  const lifecycle = options.config.LOG_LEVEL === "silent" ? logger : logger.child({}, { level: "info" });

  let running: RunningService;
  try {
    running = await options.start({ logger, tracing, stats, metrics });
  } catch (error) {
    // A guard's refusal is the whole story: its message names the setting, and is logged once, as the reason.
    if (isUnsafeSettingRefusal(error)) logger.fatal({ code: error.code, guard: error.guard, setting: error.setting }, `refusing to start: ${error.message}`);
    else logger.fatal({ err: error }, "start-up failed");
    await tracing.shutdown().catch(() => undefined);
    process.exit(1);
  }

  let stopping = false;
  const stop = async (signal: NodeJS.Signals): Promise<void> => {
    if (stopping) {
      logger.warn({ signal }, "second signal: exiting now");
      process.exit(1);
    }
    stopping = true;
    lifecycle.info({ signal }, "stopping");
    const timer = setTimeout(() => {
      logger.error("graceful stop timed out");
      process.exit(1);
    }, options.stopTimeoutMs ?? 30_000);
    timer.unref();
    try {
      await running.stop();
      await tracing.shutdown();
      lifecycle.info("stopped");
      process.exit(0);
    } catch (error) {
      logger.error({ err: error }, "stop failed");
      process.exit(1);
    }
  };
  // An operator's (or a benchmark's) look at the counters; the spans recorded since the last look are handed over.
  process.on("SIGUSR2", () => lifecycle.info({ stats: stats.snapshot(), cpu: process.cpuUsage() }, "stats"));
  process.on("SIGTERM", (s) => void stop(s));
  process.on("SIGINT", (s) => void stop(s));
  lifecycle.info(running.httpPort === undefined ? {} : { http_port: running.httpPort }, "ready");
}
