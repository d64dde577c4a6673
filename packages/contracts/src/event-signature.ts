import { createPrivateKey, createPublicKey, hash, type KeyObject } from "node:crypto";
import { keyIdOf } from "./decision-signature.js";
import { ed25519Signer, ed25519Verifier, type Ed25519Verifier } from "./ed25519.js";
import { CALL_EVENT_OWNERS, REFUSAL_REPORTERS, RUN_EVENT_OWNERS } from "./event-owners.js";
import { ServiceNameSchema, type ServiceName, type ToolgateEvent } from "./events.js";

/**
 * The header that carries an event's signature: `v1 <key id> <base64url Ed25519 signature>`, the signature over
 * the sha256 of the message's exact bytes. Signing the digest (not a canonical form) is what lets audit keep the
 * digest with a redacted copy of the event and still check the signature later.
 */
export const EVENT_SIGNATURE_HEADER = "Toolgate-Signature";

/** A service's event signing key (Ed25519) and the role its events are accepted for. */
export interface EventSigner {
  readonly keyId: string;
  readonly role: ServiceName;
  /** The header value for a message whose bytes hash to `digest` (32 bytes). */
  sign(digest: Uint8Array): string;
}

/** What a signature header says, and the digest of the bytes it came with. */
export interface SignatureFacts {
  /** The header value as received; undefined for an unsigned message. */
  header: string | undefined;
  /** sha256 of the message bytes, hex. */
  digest: string;
}

/** Why an event is not accepted as its owner's. */
export type SignatureProblem = "unsigned" | "malformed_signature" | "unknown_key" | "bad_signature" | "signer_not_owner" | "source_not_signer";

/** The keys trusted to sign events, each bound to the one role it signs for. */
export interface EventTrust {
  /** The role of a trusted key, or undefined. */
  roleOf(keyId: string): ServiceName | undefined;
  /** Why `event` (with the signature and digest it arrived with) is not its owner's, or undefined when it is. */
  check(event: ToolgateEvent, facts: SignatureFacts): SignatureProblem | undefined;
  /** The signature alone: which role signed a message with this digest, or why none trusted did. */
  signerOf(facts: SignatureFacts): { role: ServiceName; keyId: string } | { problem: Exclude<SignatureProblem, "signer_not_owner" | "source_not_signer"> };
}

/** sha256 of a message's bytes. */
export function messageDigest(data: Uint8Array): Buffer {
  return hash("sha256", data, "buffer");
}

/** The services whose signature an event of this kind and type is accepted under. */
export function eventOwners(event: Pick<ToolgateEvent, "kind" | "type">): readonly ServiceName[] {
  if (event.type === "event_refused") return REFUSAL_REPORTERS;
  const owners: Record<string, ServiceName> = event.kind === "call" ? CALL_EVENT_OWNERS : RUN_EVENT_OWNERS;
  const owner = owners[event.type];
  return owner ? [owner] : [];
}

function parsePrivateKey(text: string): KeyObject {
  const key = text.includes("BEGIN") ? createPrivateKey(text) : createPrivateKey({ key: Buffer.from(text, "base64"), format: "der", type: "pkcs8" });
  if (key.asymmetricKeyType !== "ed25519") throw new TypeError("an event signing key must be Ed25519");
  return key;
}

function parsePublicKey(text: string): KeyObject {
  const key = text.includes("BEGIN") ? createPublicKey(text) : createPublicKey({ key: Buffer.from(text, "base64"), format: "der", type: "spki" });
  if (key.asymmetricKeyType !== "ed25519") throw new TypeError("trusted event keys must be Ed25519");
  return key;
}

/** Loads `role`'s signing key from PEM (PKCS#8) or base64 DER; throws on anything else. */
export function eventSigner(privateKeyText: string, role: ServiceName): EventSigner {
  const key = parsePrivateKey(privateKeyText);
  const keyId = keyIdOf(createPublicKey(key));
  const signer = ed25519Signer(key);
  return { keyId, role, sign: (digest) => `v1 ${keyId} ${signer.sign(digest).toString("base64url")}` };
}

/** One trusted key as configured: `<role>:<base64 DER SPKI>` (or a PEM after the colon). */
export function parseTrustedKey(entry: string): { role: ServiceName; publicKey: string } {
  const colon = entry.indexOf(":");
  const role = ServiceNameSchema.safeParse(entry.slice(0, colon).trim());
  if (colon < 1 || !role.success) throw new TypeError("a trusted event key is <orchestrator|policy|executor|audit>:<base64 DER public key>");
  return { role: role.data, publicKey: entry.slice(colon + 1).trim() };
}

const HEADER = /^v1 ([0-9a-f]{16}) ([A-Za-z0-9_-]{86})$/;

/**
 * Trust in the given keys (several per role while keys rotate). Throws on a key that is not Ed25519, or one key
 * listed for two roles: a key signs for one role only.
 */
export function eventTrust(keys: readonly { role: ServiceName; publicKey: string }[]): EventTrust {
  const trusted = new Map<string, { role: ServiceName; key: Ed25519Verifier }>();
  for (const { role, publicKey } of keys) {
    const key = parsePublicKey(publicKey);
    const id = keyIdOf(key);
    const known = trusted.get(id);
    if (known && known.role !== role) throw new TypeError(`trusted event key ${id} is listed for both ${known.role} and ${role}`);
    trusted.set(id, { role, key: ed25519Verifier(key) });
  }
  const signerOf: EventTrust["signerOf"] = (facts) => {
    if (facts.header === undefined) return { problem: "unsigned" };
    const match = HEADER.exec(facts.header);
    if (!match) return { problem: "malformed_signature" };
    const entry = trusted.get(match[1]!);
    if (!entry) return { problem: "unknown_key" };
    const ok = entry.key.verify(Buffer.from(facts.digest, "hex"), Buffer.from(match[2]!, "base64url"));
    return ok ? { role: entry.role, keyId: match[1]! } : { problem: "bad_signature" };
  };
  return {
    roleOf: (keyId) => trusted.get(keyId)?.role,
    signerOf,
    check(event, facts) {
      const signer = signerOf(facts);
      if ("problem" in signer) return signer.problem;
      if (!eventOwners(event).includes(signer.role)) return "signer_not_owner";
      if (event.source !== signer.role) return "source_not_signer";
      return undefined;
    },
  };
}

/** The key id a signature header names, if it is well formed (for the record; proves nothing by itself). */
export function signatureKeyId(header: string | undefined): string | undefined {
  return header === undefined ? undefined : HEADER.exec(header)?.[1];
}
