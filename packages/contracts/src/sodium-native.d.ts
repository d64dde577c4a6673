// The three functions of sodium-native (libsodium) that Toolgate uses; the package ships no types.
declare module "sodium-native" {
  /** Derives an Ed25519 key pair (32-byte public key, 64-byte secret key) from a 32-byte seed. */
  export function crypto_sign_seed_keypair(publicKey: Uint8Array, secretKey: Uint8Array, seed: Uint8Array): void;
  /** Writes the 64-byte Ed25519 signature of `message` into `signature`. */
  export function crypto_sign_detached(signature: Uint8Array, message: Uint8Array, secretKey: Uint8Array): void;
  /** Whether `signature` (64 bytes) is a valid Ed25519 signature of `message` under `publicKey`. */
  export function crypto_sign_verify_detached(signature: Uint8Array, message: Uint8Array, publicKey: Uint8Array): boolean;
}
