import { baseEnvShape, trustEnvShape, parseEnv } from "@toolgate/service-runtime";
import { z } from "zod";

const AuditEnvSchema = z.object({
  ...baseEnvShape,
  ...trustEnvShape,
  AUDIT_SLOTS: z.coerce.number().int().min(1).max(8_192).default(512),
  AUDIT_MAX_ACK_PENDING: z.coerce.number().int().min(1).max(100_000).default(8_192),
  /** How long a delivered event may stay unacknowledged before redelivery (e.g. after an audit crash). */
  AUDIT_ACK_WAIT_MS: z.coerce.number().int().min(1_000).max(600_000).default(3_000),
  /**
   * How long an event waits for others to share its ledger block when audit is idle (under load blocks fill
   * while the previous insert is in flight and nothing waits). Audit is off every call's critical path.
   */
  AUDIT_LINGER_MS: z.coerce.number().int().min(0).max(1_000).default(50),
  HTTP_HOST: z.string().default("127.0.0.1"),
  /** 0 picks a free port (reported in the `ready` log line). */
  HTTP_PORT: z.coerce.number().int().min(0).max(65_535).default(8082),
  /** Bearer token required by the query API when set. Secret: never logged. */
  AUDIT_API_TOKEN: z.string().min(16).optional(),
});

export type AuditConfig = z.infer<typeof AuditEnvSchema>;

/** Parses the audit service's environment; throws ConfigError on a bad deploy. */
export function loadConfig(env: Record<string, string | undefined>): AuditConfig {
  return parseEnv(AuditEnvSchema, env);
}
