import { createPrivateKey, createPublicKey, type KeyObject } from "node:crypto";
import { ed25519Signer, ed25519Verifier, type Ed25519Verifier } from "./ed25519.js";
import { canonicalJson, sha256 } from "./hashing.js";
import type { Decision } from "./events.js";

/** A policy signing key (Ed25519) with the id executors look it up by. */
export interface DecisionSigner {
  readonly keyId: string;
  /** Base64url Ed25519 signature over the RFC 8785 form of `decision`. */
  sign(decision: Decision): string;
}

/** The public keys an executor trusts, by key id. */
export interface DecisionVerifier {
  /** Why a signed decision is refused, or undefined when the signature is valid for a trusted key. */
  check(decision: Decision, signature: string): "unknown_key" | "bad_signature" | undefined;
}

/** Id of a public key: the first 16 hex digits of the sha256 of its SPKI DER form. */
export function keyIdOf(publicKey: KeyObject): string {
  const der = publicKey.export({ type: "spki", format: "der" });
  return sha256(der.toString("base64")).slice("sha256:".length, "sha256:".length + 16);
}

/** Loads an Ed25519 private key from PEM (PKCS#8) or base64 DER; throws on anything else. */
export function decisionSigner(privateKeyText: string): DecisionSigner {
  const key = privateKeyText.includes("BEGIN")
    ? createPrivateKey(privateKeyText)
    : createPrivateKey({ key: Buffer.from(privateKeyText, "base64"), format: "der", type: "pkcs8" });
  if (key.asymmetricKeyType !== "ed25519") throw new TypeError("the policy signing key must be Ed25519");
  const keyId = keyIdOf(createPublicKey(key));
  const signer = ed25519Signer(key);
  return {
    keyId,
    sign: (decision) => signer.sign(Buffer.from(canonicalJson(decision), "utf8")).toString("base64url"),
  };
}

/** Builds a verifier from Ed25519 public keys in PEM (SPKI) or base64 DER. */
export function decisionVerifier(publicKeyTexts: readonly string[]): DecisionVerifier {
  const keys = new Map<string, Ed25519Verifier>();
  for (const text of publicKeyTexts) {
    const key = text.includes("BEGIN") ? createPublicKey(text) : createPublicKey({ key: Buffer.from(text, "base64"), format: "der", type: "spki" });
    if (key.asymmetricKeyType !== "ed25519") throw new TypeError("policy verification keys must be Ed25519");
    keys.set(keyIdOf(key), ed25519Verifier(key));
  }
  return {
    check(decision, signature) {
      const key = keys.get(decision.key_id);
      if (!key) return "unknown_key";
      let ok: boolean;
      try {
        ok = key.verify(Buffer.from(canonicalJson(decision), "utf8"), Buffer.from(signature, "base64url"));
      } catch {
        // A decision canonical JSON cannot hold.
        ok = false;
      }
      return ok ? undefined : "bad_signature";
    },
  };
}
