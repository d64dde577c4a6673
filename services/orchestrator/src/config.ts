import { ApiKeySchema, JwtIssuerSchema } from "@toolgate/identity";
import { ModelProviderSchema } from "@toolgate/models";
import { baseEnvShape, jsonEnv, parseEnv } from "@toolgate/service-runtime";
import { z } from "zod";

/** A comma-separated list (blanks dropped). */
const commaList = z.string().transform((text) =>
  text
    .split(",")
    .map((item) => item.trim())
    .filter((item) => item.length > 0),
);

const OrchestratorEnvSchema = z.object({
  ...baseEnvShape,
  /** JSON array of API credentials `[{ key | key_sha256, principal }]`. Secret: never logged. */
  ORCHESTRATOR_API_KEYS: jsonEnv(z.array(ApiKeySchema)).default([]),
  /** JSON array of trusted JWT issuers `[{ issuer, audience, tenant, public_key_pem | jwks | jwks_url }]`. */
  ORCHESTRATOR_JWT_ISSUERS: jsonEnv(z.array(JwtIssuerSchema)).default([]),
  /** JSON array of model providers `[{ name, kind, base_url?, api_key }]`; a run's model `<name>:<model>` uses one. Secret. */
  MODEL_PROVIDERS: jsonEnv(z.array(ModelProviderSchema)).default([]),
  HTTP_HOST: z.string().default("127.0.0.1"),
  /** 0 picks a free port (reported in the `ready` log line). */
  HTTP_PORT: z.coerce.number().int().min(0).max(65_535).default(8080),
  /** Default (and maximum) budgets of a run; a run may ask for tighter ones. */
  RUN_MAX_TURNS: z.coerce.number().int().min(1).max(1_000).default(20),
  RUN_MAX_TOOL_CALLS: z.coerce.number().int().min(1).max(100_000).default(100),
  RUN_MAX_WALL_CLOCK_MS: z.coerce
    .number()
    .int()
    .min(100)
    .max(7 * 24 * 3_600_000)
    .default(15 * 60_000),
  RUN_MAX_TOKENS: z.coerce.number().int().min(1).max(1_000_000_000).default(2_000_000),
  RUN_MAX_IDENTICAL_CALLS: z.coerce.number().int().min(1).max(1_000).default(3),
  RUN_MAX_APPROVAL_WAIT_MS: z.coerce
    .number()
    .int()
    .min(100)
    .max(7 * 24 * 3_600_000)
    .default(24 * 3_600_000),
  /** How often wall-clock and approval-wait budgets and blocked writes are checked. */
  ORCHESTRATOR_SWEEP_MS: z.coerce.number().int().min(50).max(60_000).default(500),
  /**
   * How long a host's call proposed at once may be in flight before it is recorded on its own; one that ends
   * sooner is recorded with its outcome, in one document (0: record every call at once).
   */
  ORCHESTRATOR_CALL_RECORD_DELAY_MS: z.coerce.number().int().min(0).max(60_000).default(1_000),
  /** Calls recorded but not proposed this long are proposed by the (every 20th, full) sweep. */
  ORCHESTRATOR_ORPHAN_GRACE_MS: z.coerce.number().int().min(500).max(3_600_000).default(5_000),
  /** How far back a starting orchestrator looks for such calls. */
  ORCHESTRATOR_ORPHAN_LOOKBACK_MS: z.coerce
    .number()
    .int()
    .min(60_000)
    .max(7 * 24 * 3_600_000)
    .default(3_600_000),
  ORCHESTRATOR_SLOTS: z.coerce.number().int().min(1).max(4_096).default(256),
  ORCHESTRATOR_MAX_ACK_PENDING: z.coerce.number().int().min(1).max(100_000).default(4_096),
  /** How long a client's Idempotency-Key is kept and answers retries after its first use (default 24 h). */
  ORCHESTRATOR_IDEMPOTENCY_RETENTION_MS: z.coerce
    .number()
    .int()
    .min(60_000)
    .max(30 * 24 * 3_600_000)
    .default(24 * 3_600_000),
  /** How long the first request with a key holds it (others get 409) before a retry may take it over. */
  ORCHESTRATOR_IDEMPOTENCY_LEASE_MS: z.coerce.number().int().min(1_000).max(600_000).default(3_000),
  /** How often expired idempotency keys are purged (FerretDB has no TTL index; on MongoDB the sweep is indexed). */
  ORCHESTRATOR_IDEMPOTENCY_PURGE_MS: z.coerce
    .number()
    .int()
    .min(1_000)
    .max(24 * 3_600_000)
    .default(10 * 60_000),
  /**
   * Longest the API waits for NATS or the database to accept new work before answering 503: for a dependency
   * known to be down to come back, then for a place in line, then for the submission.
   */
  ORCHESTRATOR_UNAVAILABLE_AFTER_MS: z.coerce.number().int().min(100).max(10_000).default(2_000),
  /** The `Retry-After` (seconds) of a 503 while a dependency is unavailable. */
  ORCHESTRATOR_RETRY_AFTER_S: z.coerce.number().int().min(1).max(300).default(1),
  /** How often NATS and the database are probed, for `/readyz` and for holding new work while one is down. */
  ORCHESTRATOR_PROBE_MS: z.coerce.number().int().min(100).max(60_000).default(1_000),
  // A store that answers slowly under a backlog is busy, not down: only a probe this late refuses all new work.
  ORCHESTRATOR_PROBE_TIMEOUT_MS: z.coerce.number().int().min(50).max(10_000).default(5_000),
  /**
   * Requests that create work (claims and submissions) in progress at once; beyond it a request is answered 503
   * at once, so that retries after an outage cannot pile onto a store that is still catching up.
   */
  ORCHESTRATOR_MAX_SUBMISSIONS: z.coerce.number().int().min(1).max(100_000).default(128),
  /**
   * Requests that may wait in line for one of those places (first come, first served, each for up to
   * `ORCHESTRATOR_UNAVAILABLE_AFTER_MS`), and that may wait for NATS or the database to come back; beyond it a
   * request is answered 503 at once. Default: four times `ORCHESTRATOR_MAX_SUBMISSIONS`.
   */
  ORCHESTRATOR_MAX_WAITING: z.coerce.number().int().min(0).max(1_000_000).optional(),
  /**
   * Host names (no port: any port) a request to `/mcp` may name in its `Host` header; any other is 403 (DNS
   * rebinding). Comma-separated; add the names a deployment is reached by. Default: the loopback names.
   */
  ORCHESTRATOR_MCP_ALLOWED_HOSTS: commaList.default(["localhost", "127.0.0.1", "[::1]"]),
  /**
   * Origins a browser's request to `/mcp` may come from (`scheme://host`, any port, or `scheme://host:port`);
   * a request with any other `Origin` is 403, one without `Origin` (not a browser) is not checked. Default: loopback.
   */
  ORCHESTRATOR_MCP_ALLOWED_ORIGINS: commaList.default([
    "http://localhost",
    "http://127.0.0.1",
    "http://[::1]",
    "https://localhost",
    "https://127.0.0.1",
    "https://[::1]",
  ]),
  /**
   * The orchestrator's public base URL (e.g. `https://toolgate.example.com`): the MCP resource named in its
   * protected-resource metadata and `WWW-Authenticate`. Default: the request's own scheme and (allowed) `Host`.
   */
  ORCHESTRATOR_PUBLIC_URL: z.url().optional(),
  /**
   * Authorization servers named in `/.well-known/oauth-protected-resource`, comma-separated. Default: the issuers
   * of `ORCHESTRATOR_JWT_ISSUERS`.
   */
  ORCHESTRATOR_MCP_AUTHORIZATION_SERVERS: commaList.optional(),
  /** Policy's approval page (e.g. `https://policy.example.com/approvals`), named to MCP clients whose call waits for a human. */
  ORCHESTRATOR_APPROVAL_URL: z.url().optional(),
  /** How long an MCP session (its run, task and log level) is kept after it started. */
  ORCHESTRATOR_MCP_SESSION_TTL_MS: z.coerce
    .number()
    .int()
    .min(60_000)
    .max(30 * 24 * 3_600_000)
    .default(24 * 3_600_000),
  /** How often MCP sessions and tasks past their expiry are deleted (FerretDB has no TTL index). */
  ORCHESTRATOR_MCP_PURGE_MS: z.coerce
    .number()
    .int()
    .min(1_000)
    .max(24 * 3_600_000)
    .default(10 * 60_000),
  /**
   * The audit API as the readers of the run timeline reach it (e.g. `https://audit.example.com`): the page links
   * each run's and call's trail there. Unset: it shows the trail's path on the audit API.
   */
  ORCHESTRATOR_AUDIT_URL: z.url({ protocol: /^https?$/ }).optional(),
});

export type OrchestratorConfig = z.infer<typeof OrchestratorEnvSchema>;

/** Parses the orchestrator's environment; throws ConfigError on a bad deploy. */
export function loadConfig(env: Record<string, string | undefined>): OrchestratorConfig {
  return parseEnv(OrchestratorEnvSchema, env);
}
