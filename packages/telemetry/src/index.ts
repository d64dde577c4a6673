export { createLogger, ALWAYS_REDACTED, type Logger, type LoggerOptions } from "./logger.js";
export { initTracing, traceIdOf, TRACE_SAMPLERS, type TraceSamplerName, type Tracing, type TracingOptions } from "./tracing.js";
export { RunTraces, runTraceId, spanIdOf } from "./run-traces.js";
export { stepContexts, stepKey, StepContexts, SyncContextManager } from "./step-contexts.js";
export type { Span } from "@opentelemetry/api";
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
