import { hash, timingSafeEqual } from "node:crypto";
import { PrincipalSchema, type Principal } from "@toolgate/contracts";
import { createLocalJWKSet, createRemoteJWKSet, importSPKI, jwtVerify, type JWTPayload, type JWTVerifyGetKey } from "jose";
import { z } from "zod";

/** One API credential: the key itself (secret) or its sha256 hex digest, and the principal it authenticates. */
export const ApiKeySchema = z
  .object({
    key: z.string().min(16).optional(),
    key_sha256: z
      .string()
      .regex(/^[0-9a-f]{64}$/)
      .optional(),
    principal: PrincipalSchema,
  })
  .refine((k) => (k.key === undefined) !== (k.key_sha256 === undefined), { message: "give exactly one of key or key_sha256" });
export type ApiKey = z.infer<typeof ApiKeySchema>;

/**
 * A trusted JWT issuer. Its tokens authenticate principals of `tenant` (fixed per issuer, so one tenant's
 * identity provider can never speak for another) with the subject in `sub` and roles in `roles_claim`.
 */
export const JwtIssuerSchema = z
  .object({
    issuer: z.string().min(1),
    audience: z.string().min(1),
    tenant: z.string().min(1).max(128),
    /** Verification keys: an SPKI PEM public key, a JWK set, or the issuer's JWKS URL. */
    public_key_pem: z.string().optional(),
    jwks: z.object({ keys: z.array(z.record(z.string(), z.unknown())).min(1) }).optional(),
    jwks_url: z.url().optional(),
    algorithms: z
      .array(z.enum(["EdDSA", "ES256", "ES384", "RS256", "PS256"]))
      .min(1)
      .default(["EdDSA", "ES256", "RS256"]),
    roles_claim: z.string().min(1).default("roles"),
  })
  .refine((i) => [i.public_key_pem, i.jwks, i.jwks_url].filter((k) => k !== undefined).length === 1, {
    message: "give exactly one of public_key_pem, jwks or jwks_url",
  });
export type JwtIssuer = z.infer<typeof JwtIssuerSchema>;

/** Why a request is not authenticated; never says more to the caller than "unauthenticated". */
export type AuthFailure = "missing" | "malformed" | "unknown_key" | "invalid_token" | "unknown_issuer" | "bad_claims";

export type AuthResult = { ok: true; principal: Principal; method: "api_key" | "jwt" } | { ok: false; reason: AuthFailure };

const sha256Hex = (text: string): string => hash("sha256", text);
const tokenName = /^[A-Za-z0-9._:@-]{1,128}$/;

type VerificationKey = Awaited<ReturnType<typeof importSPKI>>;

interface VerifyingIssuer {
  config: JwtIssuer;
  key: JWTVerifyGetKey | VerificationKey;
}

/**
 * Authenticates `Authorization: Bearer …` headers: an API key (compared by digest) or a JWT from a
 * configured issuer (signature, issuer, audience, expiry checked by jose). The principal it returns is the
 * only identity the runtime uses; nothing a model writes can change it.
 */
export class Authenticator {
  readonly #keys: Map<string, Principal>;
  readonly #issuers: Map<string, VerifyingIssuer>;

  private constructor(keys: Map<string, Principal>, issuers: Map<string, VerifyingIssuer>) {
    this.#keys = keys;
    this.#issuers = issuers;
  }

  /** Builds an authenticator; throws on an unusable key (a deploy error). */
  static async create(options: { apiKeys?: readonly ApiKey[]; issuers?: readonly JwtIssuer[] }): Promise<Authenticator> {
    const keys = new Map((options.apiKeys ?? []).map((k) => [k.key_sha256 ?? sha256Hex(k.key!), k.principal]));
    const issuers = new Map<string, VerifyingIssuer>();
    for (const config of options.issuers ?? []) {
      let key: JWTVerifyGetKey | VerificationKey;
      if (config.public_key_pem) key = await importSPKI(config.public_key_pem, config.algorithms[0]!);
      else if (config.jwks) key = createLocalJWKSet({ keys: config.jwks.keys });
      else key = createRemoteJWKSet(new URL(config.jwks_url!));
      issuers.set(config.issuer, { config, key });
    }
    return new Authenticator(keys, issuers);
  }

  async authenticate(authorization: string | undefined): Promise<AuthResult> {
    if (!authorization) return { ok: false, reason: "missing" };
    if (!authorization.startsWith("Bearer ")) return { ok: false, reason: "malformed" };
    const credential = authorization.slice(7).trim();
    if (credential.split(".").length === 3) return this.#jwt(credential);
    const digest = sha256Hex(credential);
    for (const [known, principal] of this.#keys) {
      if (timingSafeEqual(Buffer.from(known), Buffer.from(digest))) return { ok: true, principal, method: "api_key" };
    }
    return { ok: false, reason: "unknown_key" };
  }

  async #jwt(token: string): Promise<AuthResult> {
    let issuerName: unknown;
    try {
      issuerName = (JSON.parse(Buffer.from(token.split(".")[1]!, "base64url").toString("utf8")) as JWTPayload).iss;
    } catch {
      return { ok: false, reason: "malformed" };
    }
    const issuer = typeof issuerName === "string" ? this.#issuers.get(issuerName) : undefined;
    if (!issuer) return { ok: false, reason: "unknown_issuer" };
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, issuer.key as Parameters<typeof jwtVerify>[1], {
        issuer: issuer.config.issuer,
        audience: issuer.config.audience,
        algorithms: issuer.config.algorithms,
        requiredClaims: ["sub", "exp"],
      }));
    } catch {
      return { ok: false, reason: "invalid_token" };
    }
    const roles = payload[issuer.config.roles_claim] ?? [];
    const session = typeof payload.sid === "string" ? payload.sid : undefined;
    if (
      typeof payload.sub !== "string" ||
      !tokenName.test(payload.sub) ||
      !Array.isArray(roles) ||
      !roles.every((r) => typeof r === "string" && tokenName.test(r))
    ) {
      return { ok: false, reason: "bad_claims" };
    }
    const principal = PrincipalSchema.safeParse({
      tenant: issuer.config.tenant,
      subject: payload.sub,
      roles,
      ...(session && tokenName.test(session) ? { session } : {}),
    });
    return principal.success ? { ok: true, principal: principal.data, method: "jwt" } : { ok: false, reason: "bad_claims" };
  }
}
