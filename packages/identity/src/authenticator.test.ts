import { exportSPKI, generateKeyPair, SignJWT } from "jose";
import { beforeAll, describe, expect, it } from "vitest";
import { Authenticator, JwtIssuerSchema } from "./authenticator.js";

let auth: Authenticator;
let sign: (claims: Record<string, unknown>, options?: { issuer?: string; audience?: string; expires?: string }) => Promise<string>;
let foreignSign: typeof sign;

beforeAll(async () => {
  const { publicKey, privateKey } = await generateKeyPair("EdDSA", { extractable: true });
  const foreign = await generateKeyPair("EdDSA");
  const make =
    (key: Parameters<SignJWT["sign"]>[0]) =>
    async (claims: Record<string, unknown>, options: { issuer?: string; audience?: string; expires?: string } = {}) =>
      new SignJWT(claims)
        .setProtectedHeader({ alg: "EdDSA" })
        .setIssuer(options.issuer ?? "https://idp.acme.test")
        .setAudience(options.audience ?? "toolgate")
        .setExpirationTime(options.expires ?? "5m")
        .sign(key);
  sign = make(privateKey);
  foreignSign = make(foreign.privateKey);
  auth = await Authenticator.create({
    apiKeys: [{ key: "tgk_0123456789abcdef", principal: { tenant: "acme", subject: "svc", roles: ["researcher"] } }],
    issuers: [
      JwtIssuerSchema.parse({
        issuer: "https://idp.acme.test",
        audience: "toolgate",
        tenant: "acme",
        public_key_pem: await exportSPKI(publicKey),
        algorithms: ["EdDSA"],
      }),
    ],
  });
});

describe("Authenticator", () => {
  it("turns a valid JWT into a principal of the issuer's tenant, whatever tenant the token claims", async () => {
    const token = await sign({ sub: "alice", roles: ["researcher"], tenant: "globex", sid: "s1" });
    expect(await auth.authenticate(`Bearer ${token}`)).toEqual({
      ok: true,
      method: "jwt",
      principal: { tenant: "acme", subject: "alice", roles: ["researcher"], session: "s1" },
    });
  });

  it("refuses tokens that are expired, for another audience, from an unknown issuer or signed with another key", async () => {
    expect(await auth.authenticate(`Bearer ${await sign({ sub: "a" }, { expires: "-1m" })}`)).toEqual({ ok: false, reason: "invalid_token" });
    expect(await auth.authenticate(`Bearer ${await sign({ sub: "a" }, { audience: "other" })}`)).toEqual({ ok: false, reason: "invalid_token" });
    expect(await auth.authenticate(`Bearer ${await sign({ sub: "a" }, { issuer: "https://evil.test" })}`)).toEqual({ ok: false, reason: "unknown_issuer" });
    expect(await auth.authenticate(`Bearer ${await foreignSign({ sub: "a" })}`)).toEqual({ ok: false, reason: "invalid_token" });
  });

  it("refuses claims that are not identifiers", async () => {
    expect(await auth.authenticate(`Bearer ${await sign({ sub: "alice", roles: "admin" })}`)).toEqual({ ok: false, reason: "bad_claims" });
    expect(await auth.authenticate(`Bearer ${await sign({ sub: "a b", roles: [] })}`)).toEqual({ ok: false, reason: "bad_claims" });
  });

  it("accepts a known API key and nothing else", async () => {
    expect(await auth.authenticate("Bearer tgk_0123456789abcdef")).toMatchObject({ ok: true, method: "api_key", principal: { subject: "svc" } });
    expect(await auth.authenticate("Bearer tgk_0123456789abcdeX")).toEqual({ ok: false, reason: "unknown_key" });
    expect(await auth.authenticate(undefined)).toEqual({ ok: false, reason: "missing" });
    expect(await auth.authenticate("Basic abc")).toEqual({ ok: false, reason: "malformed" });
    expect(await auth.authenticate("Bearer a.b.c")).toEqual({ ok: false, reason: "malformed" });
  });
});
