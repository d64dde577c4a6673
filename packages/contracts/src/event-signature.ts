import { createHash, createHmac, createPrivateKey, createPublicKey, sign, verify, type KeyObject } from "node:crypto";
import type { CallEventType } from "./subjects.js";
import type { ServiceName, ToolgateEvent } from "./events.js";
import { sha256 } from "./hashing.js";

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

/** An event's signature as it travels: the key that made it and the Ed25519 signature (base64url). */
export interface EventSignature {
  key_id: string;
  value: string;
}

/** A role's Ed25519 signing key. The private key stays inside: nothing here returns or logs it. */
export interface EventSigner {
  readonly keyId: string;
  readonly role: SignerRole;
  /**
   * `event`'s wire text: its JSON text with `sig` appended as the last member, signed over the sha256 of the exact
   * UTF-8 bytes of the text before it was appended (see {@link signedBytes}). Nothing is canonicalized.
   */
  sealText(event: ToolgateEvent): string;
  /** `json` (an event's JSON text, without `sig`) sealed as it is, byte for byte: the same form as {@link sealText}. */
  sealJson(json: string): string;
  /** `event` with `sig` set as its last member: `JSON.stringify` of the result is {@link sealText}'s text. */
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
  /**
   * Checks that `data` (the message exactly as received) is signed by a trusted key of the role owning `event`'s
   * transition, named as its `source`. Without `data`, the event's own JSON text is checked: right for an event
   * from {@link EventSigner.seal}, not for one parsed from the wire (parsing reorders members).
   */
  check(event: ToolgateEvent, data?: Uint8Array): TrustVerdict;
  /** The checks that need no cryptography: a signature is present, its key trusted, its role the owner's. */
  precheck(event: ToolgateEvent, signature: EventSignature | undefined): TrustVerdict;
  /** Whether `value` is key `keyId`'s signature over `digest` (a {@link SignedBytes} digest). */
  verifyDigest(keyId: string, digest: Buffer, value: string): boolean;
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

const encoder = new TextEncoder();
const TRAILER_HEAD = encoder.encode(',"sig":{"key_id":"');
const TRAILER_MIDDLE = encoder.encode('","value":"');
const TRAILER_TAIL = encoder.encode('"}}');
const KEY_ID_LENGTH = 16;
const SIGNATURE_LENGTH = 86;
/** Bytes of the `sig` member appended last to a sealed event's text, with the closing brace. */
const TRAILER_LENGTH = TRAILER_HEAD.length + KEY_ID_LENGTH + TRAILER_MIDDLE.length + SIGNATURE_LENGTH + TRAILER_TAIL.length;
const CLOSE = Buffer.from("}");

/** What a sealed message says about itself: its signature and the sha256 of the exact bytes the signature covers. */
export interface SignedBytes {
  signature: EventSignature;
  digest: Buffer;
}

/**
 * Reads the signature appended last to a sealed event's bytes and hashes the bytes it covers (the text before
 * it, closed again), without parsing or copying; undefined when `data` does not end with one. Verifies nothing.
 */
export function signedBytes(data: Uint8Array): SignedBytes | undefined {
  const at = data.byteLength - TRAILER_LENGTH;
  if (at < 1) return undefined;
  let i = at;
  const expect = (part: Uint8Array): boolean => {
    for (let j = 0; j < part.length; j++) if (data[i + j] !== part[j]) return false;
    i += part.length;
    return true;
  };
  const take = (length: number): string => {
    const text = Buffer.from(data.buffer, data.byteOffset + i, length).toString("latin1");
    i += length;
    return text;
  };
  if (!expect(TRAILER_HEAD)) return undefined;
  const keyId = take(KEY_ID_LENGTH);
  if (!expect(TRAILER_MIDDLE)) return undefined;
  const value = take(SIGNATURE_LENGTH);
  if (!expect(TRAILER_TAIL)) return undefined;
  const digest = createHash("sha256").update(data.subarray(0, at)).update(CLOSE).digest();
  return { signature: { key_id: keyId, value }, digest };
}

function unsignedText(event: ToolgateEvent): string {
  if (event.sig === undefined) return JSON.stringify(event);
  const { sig: _sig, ...unsigned } = event;
  return JSON.stringify(unsigned);
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
  const signText = (text: string): string => sign(null, createHash("sha256").update(text, "utf8").digest(), key).toString("base64url");
  const sealJson = (text: string): string => `${text.slice(0, -1)},"sig":{"key_id":"${keyId}","value":"${signText(text)}"}}`;
  return {
    keyId,
    role,
    sealText: (event) => sealJson(unsignedText(event)),
    sealJson,
    seal(event) {
      const { sig: _sig, ...unsigned } = event;
      return { ...unsigned, sig: { key_id: keyId, value: signText(JSON.stringify(unsigned)) } } as typeof event;
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
  // Signatures already verified, with the digest they were verified over: a redelivery or a re-read of the
  // stream brings the same bytes again, and verifying costs several times signing.
  const verified = new Map<string, Buffer>();
  const verifyDigest = (keyId: string, digest: Buffer, value: string): boolean => {
    const trusted = keys.get(keyId);
    if (!trusted) return false;
    const cacheKey = `${keyId}.${value}`;
    if (verified.get(cacheKey)?.equals(digest) === true) return true;
    let ok: boolean;
    try {
      ok = verify(null, digest, trusted.key, Buffer.from(value, "base64url"));
    } catch {
      ok = false;
    }
    if (ok) {
      if (verified.size >= VERIFIED_CACHE_SIZE) verified.delete(verified.keys().next().value!);
      verified.set(cacheKey, digest);
    }
    return ok;
  };
  const precheck = (event: ToolgateEvent, signature: EventSignature | undefined): TrustVerdict => {
    if (!signature) return { ok: false, problem: "unsigned", detail: `${event.type} event ${event.id} carries no signature` };
    const trusted = keys.get(signature.key_id);
    if (!trusted) return { ok: false, problem: "unknown_key", detail: `key ${signature.key_id} is not trusted` };
    const owner = ownerOf(event);
    if (trusted.role !== owner || event.source !== owner) {
      return { ok: false, problem: "wrong_role", detail: `${event.kind}.${event.type} is ${owner}'s; signed by a ${trusted.role} key as ${event.source}` };
    }
    return { ok: true, keyId: signature.key_id, role: trusted.role };
  };
  return {
    lookup: (keyId) => keys.get(keyId),
    describe() {
      const out: Record<SignerRole, string[]> = { orchestrator: [], policy: [], executor: [] };
      for (const [keyId, { role }] of keys) out[role].push(keyId);
      return out;
    },
    precheck,
    verifyDigest,
    check(event, data) {
      const signed = signedBytes(data ?? encoder.encode(JSON.stringify(event)));
      const verdict = precheck(event, signed?.signature);
      if (!verdict.ok || !signed) return verdict;
      if (!verifyDigest(signed.signature.key_id, signed.digest, signed.signature.value))
        return { ok: false, problem: "bad_signature", detail: `the signature of ${event.id} does not verify with key ${signed.signature.key_id}` };
      return verdict;
    },
  };
}
