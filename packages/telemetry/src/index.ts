export { createLogger, ALWAYS_REDACTED, type Logger, type LoggerOptions } from "./logger.js";
export { initTracing, traceIdOf, type Tracing, type TracingOptions } from "./tracing.js";
