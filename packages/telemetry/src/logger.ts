import { pino, type Logger, type LevelWithSilent } from "pino";

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

/** Creates the service's root logger: JSON lines on stdout, credentials redacted. */
export function createLogger(options: LoggerOptions): Logger {
  return pino(
    {
      level: options.level,
      base: { service: options.service, instance: options.instance ?? String(process.pid) },
      redact: { paths: [...ALWAYS_REDACTED], censor: "[REDACTED]" },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    ...(options.destination ? [options.destination] : []),
  );
}
