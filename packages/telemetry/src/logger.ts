import { pino, type Logger, type LevelWithSilent } from "pino";
import { runTraceId } from "./run-traces.js";

export type { Logger } from "pino";

/**
 * Paths that never reach a log line, whatever a caller passes in. Tool arguments marked sensitive are
 * redacted by the audit service before they are stored; this list covers credentials everywhere.
 */
export const ALWAYS_REDACTED = [
  "password",
  "*.password",
  "secret",
  "*.secret",
  "token",
  "*.token",
  "api_key",
  "*.api_key",
  "authorization",
  "*.authorization",
  "headers.authorization",
  "req.headers.authorization",
  'req.headers["x-api-key"]',
  "signing_key",
  "*.signing_key",
] as const;

export interface LoggerOptions {
  service: string;
  level: LevelWithSilent;
  /** Stable identity of this process in logs (e.g. executor id). */
  instance?: string;
  /** Where the lines go instead of stdout (tests that read what a component logged). */
  destination?: { write(line: string): void };
}

/**
 * Log correlation: a line about a run or a call (one that names its `run_id`) carries the run's `trace_id`, the
 * trace its spans and events are in. Computed only for lines that are written, from the id alone (no context).
 * A new object each time: pino merges the line's fields into what the mixin returns.
 */
function traceIdField(fields: object): object {
  const runId = (fields as { run_id?: unknown; trace_id?: unknown }).run_id;
  return typeof runId === "string" && (fields as { trace_id?: unknown }).trace_id === undefined ? { trace_id: runTraceId(runId) } : {};
}

/**
 * Creates the service's root logger: JSON lines on stdout, credentials redacted, and `trace_id` on every line
 * that names a `run_id` among its own fields.
 */
export function createLogger(options: LoggerOptions): Logger {
  return pino(
    {
      level: options.level,
      base: { service: options.service, instance: options.instance ?? String(process.pid) },
      redact: { paths: [...ALWAYS_REDACTED], censor: "[REDACTED]" },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      mixin: traceIdField,
    },
    ...(options.destination ? [options.destination] : []),
  );
}
