export { createLogger, ALWAYS_REDACTED, type Logger, type LoggerOptions } from "./logger.js";
export { initTracing, traceIdOf, type Tracing, type TracingOptions } from "./tracing.js";
export { RuntimeStats, epochMicros, type StatsSnapshot, type TraceEntry } from "./runtime-stats.js";
