import { baseEnvShape, jsonEnv, listEnv, parseEnv } from "@toolgate/service-runtime";
import { ServedResultSchema } from "@toolgate/research-tools";
import { ToolsetNameSchema } from "@toolgate/toolsets";
import { z } from "zod";

const FaultsSchema = z.object({
  slowSearch: z.object({ pattern: z.string().min(1).max(256), delayMs: z.number().int().min(0).max(600_000) }).optional(),
  /** Faulty or malicious answers of the research read tools, for `toolgate eval` (the dataset's `served` results). */
  served: z.array(ServedResultSchema).max(1_000).optional(),
});

const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

/** An origin (scheme, host, port) without a path: `http://tools.internal:8080`. */
const OriginSchema = z.url().refine((u) => {
  try {
    return new URL(u).origin === u.replace(/\/$/, "");
  } catch {
    return false;
  }
}, "expected an origin, without a path");

/** How to reach one MCP server; being listed here is what allows the executor to talk to it. */
export const McpServerConfigSchema = z.discriminatedUnion("transport", [
  z.object({
    transport: z.literal("stdio"),
    command: z.string().min(1).max(1_024),
    args: z.array(z.string().max(4_096)).max(64).default([]),
    /** The server's environment, on top of the SDK's minimal default (PATH, HOME, USER…): no executor secrets leak in. */
    env: z.record(z.string(), z.string()).default({}),
    cwd: z.string().min(1).optional(),
  }),
  z.object({
    transport: z.literal("streamable_http"),
    url: z.url(),
    headers: z.record(z.string(), z.string()).default({}),
  }),
]);
export type McpServerConfig = z.infer<typeof McpServerConfigSchema>;

const ExecutorEnvSchema = z.object({
  ...baseEnvShape,
  TOOLGATE_TOOLSETS: listEnv().pipe(z.array(ToolsetNameSchema).min(1)).default(["research"]),
  /** Database the tools keep their own data in (evidence, effect ledger). */
  TOOLS_MONGO_DB: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,63}$/)
    .default("toolgate_tools"),
  /** Ed25519 public keys of the policy service (PEM or base64 DER), comma-separated. */
  POLICY_VERIFY_KEYS: z
    .string()
    .min(40)
    .transform((text) => (text.includes("BEGIN") ? text.split(/(?=-----BEGIN)/) : text.split(",")).map((k) => k.trim()).filter(Boolean)),
  HTTP_HOST: z.string().default("127.0.0.1"),
  /**
   * Port of the executor's metrics listener (`GET /metrics`, `GET /healthz`); `0` picks a free one (reported in the
   * `ready` log line). Unset: no listener, so that replicas on one host need no ports of their own.
   */
  HTTP_PORT: int(0, 65_535).optional(),
  /** Tool calls running at once in this process. */
  EXECUTOR_SLOTS: int(1, 4_096).default(128),
  /** Authorized calls the server hands out unacknowledged across all executors (back-pressure). */
  EXECUTOR_MAX_ACK_PENDING: int(1, 100_000).default(2_048),
  /**
   * Deliveries of one authorized call. The delivery that reaches this number runs no tool: it ends the call
   * (dead-letter) unless it was already decided. The server itself does not bound deliveries, so a call whose
   * deliveries went to executors that died still reaches this point on a live one.
   */
  EXECUTOR_MAX_DELIVER: int(2, 100).default(10),
  EXECUTOR_ACK_WAIT_MS: int(1_000, 600_000).default(3_000),
  /** Idempotency lease beyond the tool's own timeout. */
  EXECUTOR_LEASE_MARGIN_MS: int(100, 600_000).default(10_000),
  /**
   * The idempotency lease a running attempt holds, renewed every third of it while it runs (never past the
   * tool's timeout plus the margin): a dead executor's attempt is taken over this long after it died.
   */
  EXECUTOR_LIVE_LEASE_MS: int(1_000, 600_000).default(3_000),
  /** An idempotent call whose attempts were abandoned (executor died) this many times is dead-lettered: a poison message. */
  EXECUTOR_MAX_ABANDONED_ATTEMPTS: int(1, 20).default(2),
  /** Operations (long-running jobs, reconciliations) checked at once in this process. */
  EXECUTOR_OPERATION_SLOTS: int(1, 1_024).default(32),
  /** Status-check interval of long-running operations whose contract sets none. */
  EXECUTOR_OPERATION_POLL_MS: int(50, 600_000).default(1_000),
  /** Longest a long-running operation may run when its contract sets no limit. */
  EXECUTOR_OPERATION_MAX_MS: int(1_000, 7 * 24 * 3_600_000).default(3_600_000),
  /** Wait before the first status check of an unknown outcome (lets a late far-side effect land first). */
  EXECUTOR_RECONCILE_DELAY_MS: int(0, 3_600_000).default(2_000),
  /** An outcome still unknown after this is reported as `still_unknown`. */
  EXECUTOR_RECONCILE_MAX_MS: int(1_000, 7 * 24 * 3_600_000).default(600_000),
  /** Completed idempotency keys and finished operations are kept this long, then purged (explicit retention). */
  EXECUTOR_RETENTION_MS: int(3_600_000, 365 * 24 * 3_600_000).default(7 * 24 * 3_600_000),
  /** How often each executor purges what is past retention (0 = never). */
  EXECUTOR_PURGE_INTERVAL_MS: int(0, 24 * 3_600_000).default(3_600_000),
  /**
   * Allow-list of HTTP tool origins: each origin a contract's URL may name, mapped to the origin the request
   * goes to (the same one in production; a test server in tests). Contracts naming another origin do not run.
   */
  EXECUTOR_HTTP_ENDPOINTS: jsonEnv(z.record(OriginSchema, OriginSchema)).default({}),
  /** HTTP connections per origin (requests beyond wait for one: back-pressure). */
  EXECUTOR_HTTP_CONNECTIONS: int(1, 1_024).default(64),
  /** Allow-list of MCP servers by the name contracts use, with how to reach each. */
  EXECUTOR_MCP_SERVERS: jsonEnv(z.record(z.string().regex(/^[a-z][a-z0-9_-]{0,63}$/), McpServerConfigSchema)).default({}),
  /** How often the executor re-reads MCP servers' tool definitions to detect a change (besides list_changed). */
  EXECUTOR_MCP_RECHECK_MS: int(100, 24 * 3_600_000).default(60_000),
  /** Fault injection for demos and tests (off unless set), e.g. {"slowSearch":{"pattern":"slow","delayMs":5000}}. */
  EXECUTOR_FAULTS: jsonEnv(FaultsSchema).optional(),
});

export type ExecutorConfig = z.infer<typeof ExecutorEnvSchema>;

/** Parses the executor's environment; throws ConfigError on a bad deploy. */
export function loadConfig(env: Record<string, string | undefined>): ExecutorConfig {
  return parseEnv(ExecutorEnvSchema, env);
}
