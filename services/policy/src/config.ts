import { baseEnvShape, listEnv, parseEnv } from "@toolgate/service-runtime";
import { ToolsetNameSchema } from "@toolgate/toolsets";
import { z } from "zod";

const PolicyEnvSchema = z
  .object({
    ...baseEnvShape,
    TOOLGATE_TOOLSETS: listEnv().pipe(z.array(ToolsetNameSchema).min(1)).default(["research"]),
    /** Path of the grants file (JSON); reloaded when it changes. */
    POLICY_GRANTS_FILE: z.string().min(1).optional(),
    /** Inline grants (JSON), for deployments without a file. */
    POLICY_GRANTS: z.string().min(2).optional(),
    /** Ed25519 private key (PKCS#8 PEM or base64 DER). Secret: never logged. */
    POLICY_SIGNING_KEY: z.string().min(40),
    POLICY_DECISION_TTL_MS: z.coerce
      .number()
      .int()
      .min(1_000)
      .max(7 * 24 * 3_600_000)
      .default(24 * 3_600_000),
    POLICY_SLOTS: z.coerce.number().int().min(1).max(4_096).default(128),
    POLICY_MAX_ACK_PENDING: z.coerce.number().int().min(1).max(100_000).default(2_048),
  })
  .refine((env) => env.POLICY_GRANTS_FILE !== undefined || env.POLICY_GRANTS !== undefined, {
    message: "set POLICY_GRANTS_FILE or POLICY_GRANTS",
    path: ["POLICY_GRANTS_FILE"],
  });

export type PolicyConfig = z.infer<typeof PolicyEnvSchema>;

/** Parses the policy service's environment; throws ConfigError on a bad deploy. */
export function loadConfig(env: Record<string, string | undefined>): PolicyConfig {
  return parseEnv(PolicyEnvSchema, env);
}
