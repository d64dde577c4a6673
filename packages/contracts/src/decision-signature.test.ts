import { generateKeyPairSync } from "node:crypto";
import { describe, expect, it } from "vitest";
import { decisionSigner, decisionVerifier } from "./decision-signature.js";
import { keyIdOf } from "./event-signature.js";
import type { Decision } from "./events.js";
import { DecisionSchema } from "./events.js";
import { newCallId, newRunId } from "./ids.js";

function keyPair(): { privatePem: string; publicPem: string; publicDer: string } {
  const { privateKey, publicKey } = generateKeyPairSync("ed25519");
  return {
    privatePem: privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
    publicPem: publicKey.export({ type: "spki", format: "pem" }).toString(),
    publicDer: publicKey.export({ type: "spki", format: "der" }).toString("base64"),
  };
}

function decision(keyId: string): Decision {
  return DecisionSchema.parse({
    decision_id: "dec_1",
    call_id: newCallId(),
    run_id: newRunId(),
    tool: { name: "create_ticket", version: "1", hash: `sha256:${"a".repeat(64)}` },
    args_hash: `sha256:${"b".repeat(64)}`,
    principal: { tenant: "acme", subject: "alice", roles: ["analyst"] },
    context: {},
    policy_version: "p1",
    issued_at: "2024-11-29T10:00:00.000Z",
    expires_at: "2024-11-29T10:05:00.000Z",
    key_id: keyId,
  });
}

describe("decision signatures", () => {
  const policy = keyPair();
  const signer = decisionSigner(policy.privatePem);
  const verifier = decisionVerifier([policy.publicPem]);

  it("verifies a decision signed by a trusted key, whatever the key order of the object", () => {
    const d = decision(signer.keyId);
    const signature = signer.sign(d);
    expect(verifier.check(d, signature)).toBeUndefined();
    const reordered = Object.fromEntries(Object.entries(d).reverse()) as Decision;
    expect(verifier.check(reordered, signature)).toBeUndefined();
    // Public keys given as base64 DER are the same keys.
    expect(decisionVerifier([policy.publicDer]).check(d, signature)).toBeUndefined();
  });

  it("refuses a decision changed after signing", () => {
    const d = decision(signer.keyId);
    const signature = signer.sign(d);
    expect(verifier.check({ ...d, args_hash: `sha256:${"c".repeat(64)}` }, signature)).toBe("bad_signature");
    expect(verifier.check({ ...d, principal: { ...d.principal, roles: ["admin"] } }, signature)).toBe("bad_signature");
    expect(verifier.check({ ...d, expires_at: "2030-01-01T00:00:00.000Z" }, signature)).toBe("bad_signature");
  });

  it("refuses a malformed signature without throwing", () => {
    const d = decision(signer.keyId);
    for (const signature of ["", "not base64url!", "AAAA", signer.sign(decision(signer.keyId)).slice(1)]) {
      expect(verifier.check(d, signature)).toBe("bad_signature");
    }
  });

  it("refuses a key it does not trust, also when the decision names a trusted key id", () => {
    const rogue = decisionSigner(keyPair().privatePem);
    expect(rogue.keyId).not.toBe(signer.keyId);
    expect(verifier.check(decision(rogue.keyId), rogue.sign(decision(rogue.keyId)))).toBe("unknown_key");
    const spoofed = decision(signer.keyId);
    expect(verifier.check(spoofed, rogue.sign(spoofed))).toBe("bad_signature");
  });

  it("derives key ids from the public key, so signer and verifier agree", () => {
    expect(signer.keyId).toMatch(/^[0-9a-f]{16}$/);
    const { publicKey } = generateKeyPairSync("ed25519");
    expect(keyIdOf(publicKey)).toMatch(/^[0-9a-f]{16}$/);
    expect(keyIdOf(publicKey)).not.toBe(signer.keyId);
  });

  it("accepts only Ed25519 keys", () => {
    const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
    expect(() => decisionSigner(privateKey.export({ type: "pkcs8", format: "pem" }).toString())).toThrow(TypeError);
    expect(() => decisionVerifier([publicKey.export({ type: "spki", format: "pem" }).toString()])).toThrow(TypeError);
  });
});
