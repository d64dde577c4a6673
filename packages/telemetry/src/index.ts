export { createLogger, ALWAYS_REDACTED, type Logger, type LoggerOptions } from "./logger.js";
export { initTracing, traceIdOf, type Tracing, type TracingOptions } from "./tracing.js";
export { RuntimeStats, epochMicros, type StatsSnapshot, type TraceEntry } from "./runtime-stats.js";
export {
  ServiceMetrics,
  serveMetrics,
  DURATION_BUCKETS_S,
  type MetricsScrape,
  type ServiceMetricsOptions,
  type Counter,
  type Gauge,
  type Histogram,
} from "./metrics.js";
