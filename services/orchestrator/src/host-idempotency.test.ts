import type { RequestKeyRecord } from "@toolgate/storage";
import { describe, expect, it } from "vitest";
import { decideExisting, keyedProviderCallId, parseIdempotencyKey, principalScope, requestFingerprint } from "./host-idempotency.js";

describe("parseIdempotencyKey", () => {
  it("treats a missing header as no key, and reads bare and structured-field keys alike", () => {
    expect(parseIdempotencyKey(undefined)).toEqual({ ok: true, key: undefined });
    expect(parseIdempotencyKey("8e03978e-40d5-43e8-bc93-6894a57f9324")).toEqual({ ok: true, key: "8e03978e-40d5-43e8-bc93-6894a57f9324" });
    expect(parseIdempotencyKey('"8e03978e"')).toEqual({ ok: true, key: "8e03978e" });
    expect(parseIdempotencyKey("x".repeat(255))).toMatchObject({ ok: true });
  });

  it("refuses empty, too long, repeated and non-visible-ASCII keys", () => {
    for (const bad of ["", '""', "x".repeat(256), "has space", "tab\t", 'quote"inside', "back\\slash", "ünïcode", "new\nline", ["a", "b"], 42]) {
      expect(parseIdempotencyKey(bad)).toMatchObject({ ok: false });
    }
  });
});

describe("principalScope", () => {
  it("never lets two principals share a scope, whatever their names hold", () => {
    expect(principalScope({ tenant: "a/b", subject: "c", roles: [] })).not.toBe(principalScope({ tenant: "a", subject: "b/c", roles: [] }));
    expect(principalScope({ tenant: "acme", subject: "alice", roles: ["x"] })).toBe(principalScope({ tenant: "acme", subject: "alice", roles: [] }));
  });
});

describe("requestFingerprint", () => {
  it("is the same for bodies that differ in key order or wait_ms, and differs by route and content", () => {
    const a = requestFingerprint("POST /v1/tool-calls", { calls: [{ id: "1", name: "t", arguments: { x: 1, y: 2 } }], wait_ms: 0 });
    const b = requestFingerprint("POST /v1/tool-calls", { wait_ms: 5_000, calls: [{ arguments: { y: 2, x: 1 }, name: "t", id: "1" }] });
    expect(a).toBe(b);
    expect(requestFingerprint("POST /v1/providers/openai/tool-calls", { calls: [{ id: "1", name: "t", arguments: { x: 1, y: 2 } }] })).not.toBe(a);
    expect(requestFingerprint("POST /v1/tool-calls", { calls: [{ id: "1", name: "t", arguments: { x: 2, y: 2 } }] })).not.toBe(a);
  });
});

describe("keyedProviderCallId", () => {
  it("derives one id per scope and key", () => {
    expect(keyedProviderCallId("s", "k")).toBe(keyedProviderCallId("s", "k"));
    expect(keyedProviderCallId("s", "k")).not.toBe(keyedProviderCallId("t", "k"));
    expect(keyedProviderCallId("s", "k")).toMatch(/^mcp_[0-9a-f]{32}$/);
  });
});

describe("decideExisting", () => {
  const now = 1_000_000;
  const record = (overrides: Partial<RequestKeyRecord>): RequestKeyRecord => ({
    _id: "id",
    scope: "s",
    key: "k",
    route: "POST /v1/tool-calls",
    fingerprint: "f",
    state: "claimed",
    gen: "g",
    owner: "o",
    lease_until: new Date(now + 5_000),
    created_at: new Date(now),
    expires_at: new Date(now + 60_000),
    ...overrides,
  });
  it("refuses another payload, replays known work, waits for a live claim and takes over a stale or failed one", () => {
    expect(decideExisting(record({ state: "done" }), "other", now)).toBe("mismatch");
    expect(decideExisting(record({ state: "done" }), "f", now)).toBe("replay");
    expect(decideExisting(record({ state: "submitted" }), "f", now)).toBe("replay");
    expect(decideExisting(record({}), "f", now)).toBe("in_flight");
    expect(decideExisting(record({ lease_until: new Date(now - 1) }), "f", now)).toBe("take_over");
    expect(decideExisting(record({ state: "failed" }), "f", now)).toBe("take_over");
  });
});
