import { ApiKeySchema, JwtIssuerSchema } from "@toolgate/identity";
import { baseEnvShape, trustEnvShape, jsonEnv, parseEnv } from "@toolgate/service-runtime";
import { z } from "zod";

const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

const PolicyEnvSchema = z.object({
  ...baseEnvShape,
  ...trustEnvShape,
  /**
   * Directory of the Cedar policy set: `schema.cedarschema`, `*.cedar`, `entities.json` and optionally
   * `quotas.json`. Re-read when a file changes; a bad edit keeps the previous set in force.
   */
  POLICY_DIR: z.string().min(1),
  /** How often the policy directory is checked for changes. */
  POLICY_RELOAD_MS: int(100, 600_000).default(1_000),
  /** Ed25519 private key (PKCS#8 PEM or base64 DER) of policy's events and decisions; TOOLGATE_SIGNING_KEY otherwise. Secret: never logged. */
  POLICY_SIGNING_KEY: z.string().min(40).optional(),
  POLICY_DECISION_TTL_MS: int(1_000, 7 * 24 * 3_600_000).default(24 * 3_600_000),
  /** How long an approval request waits for a human before its call ends with APPROVAL_EXPIRED. */
  POLICY_APPROVAL_TTL_MS: int(1_000, 7 * 24 * 3_600_000).default(15 * 60_000),
  /** How long the authorization an approval produces may be used (a short-lived, one-time grant). */
  POLICY_APPROVAL_GRANT_TTL_MS: int(1_000, 24 * 3_600_000).default(5 * 60_000),
  /** How often requests are expired and unpublished decisions published (every replica does it; claims are inserts). */
  POLICY_SWEEP_MS: int(100, 600_000).default(1_000),
  /** Decided approvals are kept this long, then purged (quota slots go about a minute after their window ends). */
  POLICY_RETENTION_MS: int(3_600_000, 365 * 24 * 3_600_000).default(7 * 24 * 3_600_000),
  /** API keys of people who use the approval API and page: JSON `[{ key | key_sha256, principal }]`. */
  POLICY_API_KEYS: jsonEnv(z.array(ApiKeySchema)).default([]),
  /** Trusted JWT issuers for approvers: JSON `[{ issuer, audience, tenant, public_key_pem | jwks | jwks_url }]`. */
  POLICY_JWT_ISSUERS: jsonEnv(z.array(JwtIssuerSchema)).default([]),
  HTTP_HOST: z.string().min(1).default("127.0.0.1"),
  HTTP_PORT: int(0, 65_535).default(8081),
  POLICY_SLOTS: int(1, 4_096).default(128),
  POLICY_MAX_ACK_PENDING: int(1, 100_000).default(2_048),
});

export type PolicyConfig = z.infer<typeof PolicyEnvSchema>;

/** Parses the policy service's environment; throws ConfigError on a bad deploy. */
export function loadConfig(env: Record<string, string | undefined>): PolicyConfig {
  return parseEnv(PolicyEnvSchema, env);
}
