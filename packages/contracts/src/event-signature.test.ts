import { generateKeyPairSync } from "node:crypto";
import { describe, expect, it } from "vitest";
import { eventOwners, eventSigner, eventTrust, messageDigest, parseTrustedKey, signatureKeyId } from "./event-signature.js";
import type { ServiceName, ToolgateEvent } from "./events.js";

const pair = () => {
  const { privateKey, publicKey } = generateKeyPairSync("ed25519");
  return {
    privateKey: privateKey.export({ type: "pkcs8", format: "der" }).toString("base64"),
    publicKey: publicKey.export({ type: "spki", format: "der" }).toString("base64"),
  };
};

const event = (type: string, source: ServiceName, kind: "call" | "run" = "call") => ({ kind, type, source }) as unknown as ToolgateEvent;
const bytes = (text: string) => new TextEncoder().encode(text);

describe("event signatures", () => {
  const executor = pair();
  const policy = pair();
  const trust = eventTrust([
    { role: "executor", publicKey: executor.publicKey },
    { role: "policy", publicKey: policy.publicKey },
  ]);

  it("accepts an event signed by a key of its owner's role, over exactly its bytes", () => {
    const signer = eventSigner(executor.privateKey, "executor");
    const data = bytes('{"type":"completed"}');
    const header = signer.sign(messageDigest(data));
    expect(header).toMatch(/^v1 [0-9a-f]{16} [A-Za-z0-9_-]{86}$/);
    expect(signatureKeyId(header)).toBe(signer.keyId);
    const digest = messageDigest(data).toString("hex");
    expect(trust.check(event("completed", "executor"), { header, digest })).toBeUndefined();
    // One byte changed: the digest differs and the signature no longer verifies.
    expect(trust.check(event("completed", "executor"), { header, digest: messageDigest(bytes('{"type":"completed" }')).toString("hex") })).toBe(
      "bad_signature",
    );
  });

  it("says why anything else is refused: unsigned, malformed, unknown key, another role's key, a source that is not the signer", () => {
    const digest = messageDigest(bytes("{}")).toString("hex");
    const byPolicy = eventSigner(policy.privateKey, "policy").sign(Buffer.from(digest, "hex"));
    const byStranger = eventSigner(pair().privateKey, "executor").sign(Buffer.from(digest, "hex"));
    expect(trust.check(event("completed", "executor"), { header: undefined, digest })).toBe("unsigned");
    expect(trust.check(event("completed", "executor"), { header: "v1 nonsense", digest })).toBe("malformed_signature");
    expect(trust.check(event("completed", "executor"), { header: byStranger, digest })).toBe("unknown_key");
    expect(trust.check(event("completed", "executor"), { header: byPolicy, digest })).toBe("signer_not_owner");
    expect(trust.check(event("authorized", "executor"), { header: byPolicy, digest })).toBe("source_not_signer");
    expect(trust.check(event("authorized", "policy"), { header: byPolicy, digest })).toBeUndefined();
  });

  it("trusts several keys of one role while it rotates, and refuses one key listed for two roles", () => {
    const next = pair();
    const rotating = eventTrust([
      { role: "executor", publicKey: executor.publicKey },
      { role: "executor", publicKey: next.publicKey },
    ]);
    const digest = messageDigest(bytes("x"));
    for (const key of [executor, next]) {
      const header = eventSigner(key.privateKey, "executor").sign(digest);
      expect(rotating.check(event("started", "executor"), { header, digest: digest.toString("hex") })).toBeUndefined();
    }
    expect(() =>
      eventTrust([
        { role: "executor", publicKey: executor.publicKey },
        { role: "policy", publicKey: executor.publicKey },
      ]),
    ).toThrow(/both executor and policy/);
  });

  it("lets every acting service report refusals, and nobody else publish another's transition", () => {
    expect(eventOwners(event("event_refused", "policy"))).toEqual(["orchestrator", "policy", "executor"]);
    expect(eventOwners(event("proposed", "orchestrator"))).toEqual(["orchestrator"]);
    expect(eventOwners(event("stopped", "orchestrator", "run"))).toEqual(["orchestrator"]);
    expect(eventOwners(event("no_such_type", "audit"))).toEqual([]);
  });

  it("reads a trusted key as <role>:<key> and refuses anything else without echoing the value", () => {
    expect(parseTrustedKey(`policy:${policy.publicKey}`)).toEqual({ role: "policy", publicKey: policy.publicKey });
    expect(() => parseTrustedKey(`root:${policy.publicKey}`)).toThrow(/<orchestrator\|policy\|executor\|audit>:/);
    const refused = (() => {
      try {
        parseTrustedKey(policy.publicKey);
        return "parsed";
      } catch (error) {
        return (error as Error).message;
      }
    })();
    expect(refused).toMatch(/^a trusted event key is/);
    expect(refused).not.toContain(policy.publicKey.slice(-24));
    expect(() => eventSigner(policy.privateKey.slice(0, 40), "policy")).toThrow();
  });
});
