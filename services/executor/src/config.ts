import { baseEnvShape, jsonEnv, listEnv, parseEnv } from "@toolgate/service-runtime";
import { ToolsetNameSchema } from "@toolgate/toolsets";
import { z } from "zod";

const FaultsSchema = z.object({
  slowSearch: z.object({ pattern: z.string().min(1).max(256), delayMs: z.number().int().min(0).max(600_000) }).optional(),
});

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
  /** Tool calls running at once in this process. */
  EXECUTOR_SLOTS: z.coerce.number().int().min(1).max(4_096).default(128),
  /** Authorized calls the server hands out unacknowledged across all executors (back-pressure). */
  EXECUTOR_MAX_ACK_PENDING: z.coerce.number().int().min(1).max(100_000).default(2_048),
  EXECUTOR_MAX_DELIVER: z.coerce.number().int().min(2).max(100).default(10),
  EXECUTOR_ACK_WAIT_MS: z.coerce.number().int().min(1_000).max(600_000).default(30_000),
  /** Lease on an idempotency key beyond the tool's own timeout. */
  EXECUTOR_LEASE_MARGIN_MS: z.coerce.number().int().min(100).max(600_000).default(10_000),
  /** Fault injection for demos and tests (off unless set), e.g. {"slowSearch":{"pattern":"slow","delayMs":5000}}. */
  EXECUTOR_FAULTS: jsonEnv(FaultsSchema).optional(),
});

export type ExecutorConfig = z.infer<typeof ExecutorEnvSchema>;

/** Parses the executor's environment; throws ConfigError on a bad deploy. */
export function loadConfig(env: Record<string, string | undefined>): ExecutorConfig {
  return parseEnv(ExecutorEnvSchema, env);
}
