import { generateKeyPairSync } from "node:crypto";
import { describe, expect, it } from "vitest";
import { nextCallEvent, runEvent } from "./event-builders.js";
import { devPrivateKey, eventSigner, exportKeyPair, signedBytes, trustedKeys, type SignerRole } from "./event-signature.js";
import { failure } from "./result-envelope.js";
import { newCallId, newRunId } from "./ids.js";
import { parseEvent } from "./parse-event.js";

const principal = { tenant: "acme", subject: "alice", roles: ["analyst"] };
const fresh = () => exportKeyPair(generateKeyPairSync("ed25519").privateKey);
const keys = { orchestrator: fresh(), policy: fresh(), executor: fresh() };
const signers = Object.fromEntries(Object.entries(keys).map(([role, k]) => [role, eventSigner(role as SignerRole, k.privateKey)])) as Record<
  SignerRole,
  ReturnType<typeof eventSigner>
>;
const trust = trustedKeys({ orchestrator: [keys.orchestrator.publicKey], policy: [keys.policy.publicKey], executor: [keys.executor.publicKey] });

function proposed() {
  return nextCallEvent({ call_id: newCallId(), run_id: newRunId(), principal, seq: 0 }, "proposed", "orchestrator", {
    provider_call_id: "c1",
    tool_name: "save_evidence",
    arguments_json: "{}",
    context: { task_id: "task_1" },
    turn: 0,
  });
}

describe("event signatures", () => {
  it("accepts an event sealed by the role that owns it, also after a JSON round trip through the bus parser", () => {
    const event = proposed();
    const sealed = signers.orchestrator.seal(event);
    expect(trust.check(sealed)).toEqual({ ok: true, keyId: signers.orchestrator.keyId, role: "orchestrator" });
    // The wire text is the event's own JSON text with the signature appended: no canonical form is computed.
    const text = signers.orchestrator.sealText(event);
    expect(text).toBe(JSON.stringify(sealed));
    expect(signers.orchestrator.sealJson(JSON.stringify(event))).toBe(text);
    expect(text.startsWith(JSON.stringify(event).slice(0, -1))).toBe(true);
    const bytes = new TextEncoder().encode(text);
    const parsed = parseEvent(bytes, 1 << 20);
    if (!parsed.ok) throw new Error(parsed.rejection.detail);
    expect(parsed.event.sig).toEqual(sealed.sig);
    expect(trust.check(parsed.event, bytes).ok).toBe(true);
    const run = signers.orchestrator.seal(runEvent({ run_id: newRunId(), principal }, "started", "orchestrator", 0, { model: "m", context: {} }));
    expect(trust.check(run).ok).toBe(true);
  });

  it("refuses an unsigned event, an unknown key, a changed field and another role's key, each with its own problem", () => {
    const event = proposed();
    expect(trust.check(event)).toMatchObject({ ok: false, problem: "unsigned" });
    const rogue = eventSigner("orchestrator", fresh().privateKey);
    expect(trust.check(rogue.seal(event))).toMatchObject({ ok: false, problem: "unknown_key" });
    const sealed = signers.orchestrator.seal(event);
    expect(trust.check({ ...sealed, payload: { ...sealed.payload, context: { task_id: "task_other" } } })).toMatchObject({
      ok: false,
      problem: "bad_signature",
    });
    // Policy's key is trusted, but a proposal is the orchestrator's to make.
    expect(trust.check(signers.policy.seal(event))).toMatchObject({ ok: false, problem: "wrong_role" });
    // The executor's key on a `completed` that names another source is refused too.
    const completed = nextCallEvent({ call_id: event.call_id, run_id: event.run_id, principal, seq: 5 }, "completed", "orchestrator", {
      result: failure(event.call_id, "EXECUTION_ERROR", "x"),
      duration_ms: 1,
    });
    expect(trust.check(signers.executor.seal(completed))).toMatchObject({ ok: false, problem: "wrong_role" });
    expect(trust.check(signers.executor.seal({ ...completed, source: "executor" })).ok).toBe(true);
  });

  it("verifies the bytes as they arrived: one changed byte, a moved signature or a trailing space is refused", () => {
    const event = proposed();
    const text = signers.orchestrator.sealText(event);
    const bytes = new TextEncoder().encode(text);
    expect(signedBytes(bytes)?.signature).toEqual({ key_id: signers.orchestrator.keyId, value: expect.any(String) });
    const changed = new TextEncoder().encode(text.replace('"turn":0', '"turn":1'));
    expect(trust.check(event, changed)).toMatchObject({ ok: false, problem: "bad_signature" });
    // The same members in another order are other bytes: still a valid event, but not the one that was signed.
    const { sig: appended, ...members } = JSON.parse(text) as Record<string, unknown>;
    const reordered = { ...Object.fromEntries(Object.entries(members).reverse()), sig: appended };
    expect(trust.check(event, new TextEncoder().encode(JSON.stringify(reordered)))).toMatchObject({ ok: false, problem: "bad_signature" });
    expect(signedBytes(new TextEncoder().encode(`${text} `))).toBeUndefined();
    expect(trust.check(event, new TextEncoder().encode(`${text} `))).toMatchObject({ ok: false, problem: "unsigned" });
    const { sig, ...unsigned } = JSON.parse(text) as Record<string, unknown>;
    expect(trust.check(event, new TextEncoder().encode(JSON.stringify({ sig, ...unsigned })))).toMatchObject({ ok: false, problem: "unsigned" });
  });

  it("trusts several keys per role (rotation) and refuses one key listed for two roles", () => {
    const next = fresh();
    const rotating = trustedKeys({ orchestrator: [keys.orchestrator.publicKey, next.publicKey], policy: [keys.policy.publicKey] });
    expect(rotating.check(signers.orchestrator.seal(proposed())).ok).toBe(true);
    expect(rotating.check(eventSigner("orchestrator", next.privateKey).seal(proposed())).ok).toBe(true);
    expect(() => trustedKeys({ orchestrator: [next.publicKey], executor: [next.publicKey] })).toThrow(TypeError);
  });

  it("derives a message id that is stable per key and event id, and that another key cannot reproduce", () => {
    const id = "call_01:completed:1";
    expect(signers.executor.msgId(id)).toBe(signers.executor.msgId(id));
    expect(signers.executor.msgId(id).startsWith(`${id}~`)).toBe(true);
    expect(eventSigner("executor", fresh().privateKey).msgId(id)).not.toBe(signers.executor.msgId(id));
    expect(signers.executor.msgId("call_01:completed:2")).not.toBe(signers.executor.msgId(id));
  });

  it("derives the same dev key from the same seed and a different one per role; sealed events never carry the private key", () => {
    const a = exportKeyPair(devPrivateKey("dev-seed-1", "policy"));
    expect(exportKeyPair(devPrivateKey("dev-seed-1", "policy"))).toEqual(a);
    expect(exportKeyPair(devPrivateKey("dev-seed-1", "executor")).publicKey).not.toBe(a.publicKey);
    const text = JSON.stringify(eventSigner("policy", a.privateKey).seal(proposed()));
    expect(text).not.toContain(a.privateKey);
    expect(text).not.toContain(a.privateKey.slice(-44));
  });
});

describe("verified signature cache", () => {
  it("answers a repeated check from memory but never for a changed event with the same signature", () => {
    const sealed = signers.orchestrator.seal(proposed());
    expect(trust.check(sealed).ok).toBe(true);
    expect(trust.check(sealed).ok).toBe(true);
    expect(trust.check({ ...sealed, payload: { ...sealed.payload, turn: 7 } })).toMatchObject({ ok: false, problem: "bad_signature" });
  });
});
