import { createHash, createHmac, createPrivateKey, createPublicKey, sign, verify, type KeyObject } from "node:crypto";
import type { CallEventType } from "./subjects.js";
import type { ServiceName, ToolgateEvent } from "./events.js";
import { canonicalJson, sha256 } from "./hashing.js";

/** The services that publish transitions, each with keys of its own. */
export type SignerRole = Exclude<ServiceName, "audit">;
export const SIGNER_ROLES = ["orchestrator", "policy", "executor"] as const satisfies readonly SignerRole[];

/** Which role owns (and alone may sign) each call transition; every run transition is the orchestrator's. */
export const CALL_EVENT_OWNERS: Readonly<Record<CallEventType, SignerRole>> = {
  proposed: "orchestrator",
  result_attached: "orchestrator",
  rejected: "policy",
  denied: "policy",
  approval_requested: "policy",
  approval_granted: "policy",
  authorized: "policy",
  started: "executor",
  completed: "executor",
  outcome_unknown: "executor",
  refused: "executor",
  retry_scheduled: "executor",
  operation_updated: "executor",
  reconciled: "executor",
  dead_lettered: "executor",
};

/** The role that owns `event`'s transition. */
export function ownerOf(event: Pick<ToolgateEvent, "kind" | "type">): SignerRole {
  return event.kind === "call" ? CALL_EVENT_OWNERS[event.type as CallEventType] : "orchestrator";
}

/** Why an event is not trusted. */
export type TrustProblem = "unsigned" | "unknown_key" | "bad_signature" | "wrong_role";

/** A verdict on one event: the signer's key and role when it verifies, the problem when it does not. */
export type TrustVerdict = { ok: true; keyId: string; role: SignerRole } | { ok: false; problem: TrustProblem; detail: string };

/** A role's Ed25519 signing key. The private key stays inside: nothing here returns or logs it. */
export interface EventSigner {
  readonly keyId: string;
  readonly role: SignerRole;
  /** `event` with `sig` set: Ed25519 over the sha256 of its RFC 8785 form without `sig`. */
  seal<E extends ToolgateEvent>(event: E): E;
  /** Base64url Ed25519 signature over `bytes` (used for policy's decisions). */
  signBytes(bytes: Buffer): string;
  /**
   * The `Nats-Msg-Id` for event id `id`: the id plus a keyed digest only this key can compute, so a publisher
   * without the key cannot claim, in the duplicate window, the id a legitimate transition will use.
   */
  msgId(id: string): string;
}

/** The public keys trusted per role (several per role while keys rotate). */
export interface TrustedKeys {
  /** Checks `event`'s signature and that its key belongs to the role owning the transition (and named as `source`). */
  check(event: ToolgateEvent): TrustVerdict;
  /** The role and key of `keyId`, if trusted. */
  lookup(keyId: string): { role: SignerRole; key: KeyObject } | undefined;
  /** Key ids trusted per role, for start-up logs. */
  describe(): Record<SignerRole, string[]>;
}

/** Public key texts trusted per role (PEM SPKI or base64 DER). */
export type TrustedKeyTexts = { [R in SignerRole]?: readonly string[] | undefined };

/** Id of a public key: the first 16 hex digits of the sha256 of its SPKI DER form. */
export function keyIdOf(publicKey: KeyObject): string {
  const der = publicKey.export({ type: "spki", format: "der" });
  return sha256(der.toString("base64")).slice("sha256:".length, "sha256:".length + 16);
}

/** Loads an Ed25519 private key from PEM (PKCS#8) or base64 DER; throws TypeError on anything else. */
export function loadPrivateKey(text: string): KeyObject {
  let key: KeyObject;
  try {
    key = text.includes("BEGIN") ? createPrivateKey(text) : createPrivateKey({ key: Buffer.from(text.trim(), "base64"), format: "der", type: "pkcs8" });
  } catch (error) {
    // OpenSSL's decoder errors name the failing step, never the key material.
    throw new TypeError("a signing key is not a PKCS#8 private key", { cause: error });
  }
  if (key.asymmetricKeyType !== "ed25519") throw new TypeError("signing keys must be Ed25519");
  return key;
}

/** Loads an Ed25519 public key from PEM (SPKI) or base64 DER; throws TypeError on anything else. */
export function loadPublicKey(text: string): KeyObject {
  const key = text.includes("BEGIN") ? createPublicKey(text) : createPublicKey({ key: Buffer.from(text.trim(), "base64"), format: "der", type: "spki" });
  if (key.asymmetricKeyType !== "ed25519") throw new TypeError("verification keys must be Ed25519");
  return key;
}

/** Verified signatures remembered per process (the oldest is forgotten first). */
const VERIFIED_CACHE_SIZE = 4_096;

const PKCS8_ED25519_PREFIX = Buffer.from("302e020100300506032b657004220420", "hex");

/**
 * A development key for `role` derived from `seed`: every process given the same seed agrees on every role's
 * keys without a key file. Anyone holding the seed holds every role's key, so it is for dev stacks only.
 */
export function devPrivateKey(seed: string, role: SignerRole): KeyObject {
  const secret = createHash("sha256").update(`toolgate dev key\n${role}\n${seed}`, "utf8").digest();
  return createPrivateKey({ key: Buffer.concat([PKCS8_ED25519_PREFIX, secret]), format: "der", type: "pkcs8" });
}

/** Base64 DER texts of a private key and its public key (the form the environment carries). */
export function exportKeyPair(privateKey: KeyObject): { privateKey: string; publicKey: string; keyId: string } {
  const publicKey = createPublicKey(privateKey);
  return {
    privateKey: privateKey.export({ type: "pkcs8", format: "der" }).toString("base64"),
    publicKey: publicKey.export({ type: "spki", format: "der" }).toString("base64"),
    keyId: keyIdOf(publicKey),
  };
}

/** The digest an event's signature covers: sha256 of its RFC 8785 form without `sig`. */
export function eventDigest(event: ToolgateEvent): Buffer {
  const { sig: _sig, ...unsigned } = event;
  return createHash("sha256").update(canonicalJson(unsigned), "utf8").digest();
}

/** A signer for `role` from a private key (KeyObject, PEM or base64 DER). Throws TypeError for a non-Ed25519 key. */
export function eventSigner(role: SignerRole, privateKey: KeyObject | string): EventSigner {
  const key = typeof privateKey === "string" ? loadPrivateKey(privateKey) : privateKey;
  if (key.asymmetricKeyType !== "ed25519") throw new TypeError("signing keys must be Ed25519");
  const keyId = keyIdOf(createPublicKey(key));
  // Not the key itself: a digest of it, so the msg-id secret reveals nothing about the signing key.
  const idSecret = createHash("sha256")
    .update("toolgate msg-id\n")
    .update(key.export({ type: "pkcs8", format: "der" }))
    .digest();
  return {
    keyId,
    role,
    seal(event) {
      const value = sign(null, eventDigest(event), key).toString("base64url");
      return { ...event, sig: { key_id: keyId, value } };
    },
    signBytes: (bytes) => sign(null, bytes, key).toString("base64url"),
    msgId: (id) => `${id}~${createHmac("sha256", idSecret).update(id).digest("base64url").slice(0, 22)}`,
  };
}

/** The trusted keys from their texts; throws TypeError for a key that is not Ed25519 or one listed for two roles. */
export function trustedKeys(texts: TrustedKeyTexts): TrustedKeys {
  const keys = new Map<string, { role: SignerRole; key: KeyObject }>();
  for (const role of SIGNER_ROLES) {
    for (const text of texts[role] ?? []) {
      const key = loadPublicKey(text);
      const keyId = keyIdOf(key);
      const known = keys.get(keyId);
      // One key, one role: a key shared by two roles would let either sign the other's transitions.
      if (known && known.role !== role) throw new TypeError(`key ${keyId} is listed for both ${known.role} and ${role}`);
      keys.set(keyId, { role, key });
    }
  }
  // Signatures already verified, with the digest they were verified over: a process often sees one event twice
  // (a consumer and a live watch, a re-read of the stream), and verifying costs several times signing.
  const verified = new Map<string, Buffer>();
  return {
    lookup: (keyId) => keys.get(keyId),
    describe() {
      const out: Record<SignerRole, string[]> = { orchestrator: [], policy: [], executor: [] };
      for (const [keyId, { role }] of keys) out[role].push(keyId);
      return out;
    },
    check(event) {
      if (!event.sig) return { ok: false, problem: "unsigned", detail: `${event.type} event ${event.id} carries no signature` };
      const trusted = keys.get(event.sig.key_id);
      if (!trusted) return { ok: false, problem: "unknown_key", detail: `key ${event.sig.key_id} is not trusted` };
      const owner = ownerOf(event);
      if (trusted.role !== owner || event.source !== owner) {
        return { ok: false, problem: "wrong_role", detail: `${event.kind}.${event.type} is ${owner}'s; signed by a ${trusted.role} key as ${event.source}` };
      }
      const digest = eventDigest(event);
      const cacheKey = `${event.sig.key_id}.${event.sig.value}`;
      let ok = verified.get(cacheKey)?.equals(digest) === true;
      if (!ok) {
        try {
          ok = verify(null, digest, trusted.key, Buffer.from(event.sig.value, "base64url"));
        } catch {
          ok = false;
        }
        if (ok) {
          if (verified.size >= VERIFIED_CACHE_SIZE) verified.delete(verified.keys().next().value!);
          verified.set(cacheKey, digest);
        }
      }
      if (!ok) return { ok: false, problem: "bad_signature", detail: `the signature of ${event.id} does not verify with key ${event.sig.key_id}` };
      return { ok: true, keyId: event.sig.key_id, role: trusted.role };
    },
  };
}
