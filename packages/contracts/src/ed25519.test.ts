import { generateKeyPairSync, sign, verify } from "node:crypto";
import { describe, expect, it } from "vitest";
import { ed25519Signer, ed25519Verifier } from "./ed25519.js";

// libsodium and OpenSSL speak the same Ed25519 (RFC 8032): keys parsed by node:crypto, signatures either can check.
describe("ed25519", () => {
  const { publicKey, privateKey } = generateKeyPairSync("ed25519");
  const message = Buffer.from("the sha256 digest of an event's bytes, or a decision's canonical JSON");

  it("signs what node:crypto verifies, and verifies what node:crypto signs", () => {
    const signature = ed25519Signer(privateKey).sign(message);
    expect(signature).toEqual(sign(null, message, privateKey));
    expect(verify(null, message, publicKey, signature)).toBe(true);
    expect(ed25519Verifier(publicKey).verify(message, sign(null, message, privateKey))).toBe(true);
  });

  it("refuses another message, another key, a flipped bit and a signature of the wrong length, without throwing", () => {
    const signature = ed25519Signer(privateKey).sign(message);
    const verifier = ed25519Verifier(publicKey);
    expect(verifier.verify(Buffer.from("another message"), signature)).toBe(false);
    expect(ed25519Verifier(generateKeyPairSync("ed25519").publicKey).verify(message, signature)).toBe(false);
    const flipped = Buffer.from(signature);
    flipped[10]! ^= 1;
    expect(verifier.verify(message, flipped)).toBe(false);
    expect(verifier.verify(message, signature.subarray(0, 63))).toBe(false);
    expect(verifier.verify(message, Buffer.concat([signature, Buffer.alloc(1)]))).toBe(false);
  });

  it("takes only Ed25519 keys of the right kind", () => {
    const rsa = generateKeyPairSync("rsa", { modulusLength: 1024 });
    expect(() => ed25519Signer(rsa.privateKey)).toThrow(TypeError);
    expect(() => ed25519Verifier(rsa.publicKey)).toThrow(TypeError);
    expect(() => ed25519Signer(publicKey)).toThrow(TypeError);
  });
});
