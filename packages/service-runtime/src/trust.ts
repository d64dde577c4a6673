import {
  SIGNER_ROLES,
  devPrivateKey,
  eventSigner,
  exportKeyPair,
  trustedKeys,
  type EventSigner,
  type ServiceName,
  type SignerRole,
  type TrustedKeys,
  type TrustedKeyTexts,
} from "@toolgate/contracts";
import { z } from "zod";
import { ConfigError, jsonEnv } from "./config.js";

const keyList = z.array(z.string().min(40).max(4_096)).max(16).default([]);

/** Environment variables of the keys that sign and check transitions (spread into a service's env schema). */
export const trustEnvShape = {
  /** This service's Ed25519 private key (PKCS#8 PEM or base64 DER). Secret: never logged, never in an event. */
  TOOLGATE_SIGNING_KEY: z.string().min(40).optional(),
  /**
   * Public keys trusted per role, JSON `{ "orchestrator": [...], "policy": [...], "executor": [...] }` (PEM or
   * base64 DER). Several per role let keys rotate: trust the new key everywhere, then switch the signer.
   */
  TOOLGATE_TRUSTED_KEYS: jsonEnv(z.strictObject({ orchestrator: keyList, policy: keyList, executor: keyList }).partial()).optional(),
  /**
   * Development only: derive every role's key from this shared seed (so a dev stack needs no key files). Whoever
   * has the seed has every role's key, which is exactly what production must not allow.
   */
  TOOLGATE_DEV_KEY_SEED: z.string().min(8).max(256).optional(),
};

export interface TrustConfig {
  TOOLGATE_SIGNING_KEY?: string | undefined;
  TOOLGATE_TRUSTED_KEYS?: TrustedKeyTexts | undefined;
  TOOLGATE_DEV_KEY_SEED?: string | undefined;
}

/** A service's signer (none for audit, which publishes nothing) and the keys it trusts. */
export interface Trust {
  signer?: EventSigner;
  keys: TrustedKeys;
  /** What to log at start-up: key ids only. */
  summary: { key_id?: string; trusted: Record<SignerRole, string[]>; dev_keys: boolean };
}

/**
 * Loads `service`'s signing key and the trusted keys from its configuration; `signingKey` overrides
 * TOOLGATE_SIGNING_KEY (policy's POLICY_SIGNING_KEY). Throws ConfigError when a role has no trusted key or a
 * publishing service has no key of its own — a service that cannot check its peers does not start.
 */
export function loadTrust(service: ServiceName, config: TrustConfig, signingKey?: string): Trust {
  const texts: Record<SignerRole, string[]> = { orchestrator: [], policy: [], executor: [] };
  for (const role of SIGNER_ROLES) texts[role].push(...(config.TOOLGATE_TRUSTED_KEYS?.[role] ?? []));
  const seed = config.TOOLGATE_DEV_KEY_SEED;
  if (seed !== undefined) for (const role of SIGNER_ROLES) texts[role].push(exportKeyPair(devPrivateKey(seed, role)).publicKey);
  let keys: TrustedKeys;
  let signer: EventSigner | undefined;
  try {
    keys = trustedKeys(texts);
    if (service !== "audit") {
      const own = signingKey ?? config.TOOLGATE_SIGNING_KEY;
      if (own !== undefined) signer = eventSigner(service, own);
      else if (seed !== undefined) signer = eventSigner(service, devPrivateKey(seed, service));
    }
  } catch (error) {
    throw new ConfigError([`signing keys: ${(error as Error).message}`]);
  }
  const trusted = keys.describe();
  const problems: string[] = [];
  for (const role of SIGNER_ROLES) if (trusted[role].length === 0) problems.push(`TOOLGATE_TRUSTED_KEYS: no ${role} key is trusted`);
  if (service !== "audit" && !signer) problems.push("TOOLGATE_SIGNING_KEY: required (or TOOLGATE_DEV_KEY_SEED in development)");
  if (signer && keys.lookup(signer.keyId)?.role !== signer.role)
    problems.push(`TOOLGATE_TRUSTED_KEYS: this service's own key ${signer.keyId} is not trusted as ${service}`);
  if (problems.length > 0) throw new ConfigError(problems);
  return { ...(signer ? { signer } : {}), keys, summary: { ...(signer ? { key_id: signer.keyId } : {}), trusted, dev_keys: seed !== undefined } };
}
