import { verify, type KeyObject } from "node:crypto";
import { eventSigner, keyIdOf, loadPublicKey, type EventSigner, type TrustedKeys } from "./event-signature.js";
import { canonicalJson } from "./hashing.js";
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

/**
 * The decision signer of policy's event signer: one key signs policy's events and the decisions inside them.
 * Accepts the key as PEM (PKCS#8) or base64 DER text too; throws TypeError for a non-Ed25519 key.
 */
export function decisionSigner(key: EventSigner | string): DecisionSigner {
  const signer = typeof key === "string" ? eventSigner("policy", key) : key;
  return {
    keyId: signer.keyId,
    sign: (decision) => signer.signBytes(Buffer.from(canonicalJson(decision), "utf8")),
  };
}

/** Builds a verifier from Ed25519 public keys in PEM (SPKI) or base64 DER, and the policy keys of `trusted`. */
export function decisionVerifier(publicKeyTexts: readonly string[], trusted?: TrustedKeys): DecisionVerifier {
  const keys = new Map<string, KeyObject>();
  for (const text of publicKeyTexts) {
    const key = loadPublicKey(text);
    keys.set(keyIdOf(key), key);
  }
  return {
    check(decision, signature) {
      const policyKey = trusted?.lookup(decision.key_id);
      const key = keys.get(decision.key_id) ?? (policyKey?.role === "policy" ? policyKey.key : undefined);
      if (!key) return "unknown_key";
      let ok: boolean;
      try {
        ok = verify(null, Buffer.from(canonicalJson(decision), "utf8"), key, Buffer.from(signature, "base64url"));
      } catch {
        ok = false;
      }
      return ok ? undefined : "bad_signature";
    },
  };
}
