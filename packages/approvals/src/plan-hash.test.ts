import { describe, expect, it } from "vitest";
import { planHash, planOf } from "./plan-hash.js";

const tool = { name: "save_evidence", version: "1.0.0", hash: `sha256:${"a".repeat(64)}` };
const alice = { tenant: "acme", subject: "alice", roles: ["researcher"] };
const resources = [{ type: "task", pointer: "/task_id", id: "task_c04" }];
const args = { task_id: "task_c04", claim: "Sessions persist state.", source_url: "https://example.test/s", limit: 1 };
const hashOf = (a: Record<string, unknown>, over: Partial<Parameters<typeof planHash>[0]> = {}) =>
  planHash({ tool, arguments: a as never, principal: alice, resources, ...over });

describe("plan hash", () => {
  it("is the same for arguments that differ only in key order or number spelling", () => {
    const reordered = JSON.parse('{"limit":1.0,"source_url":"https://example.test/s","claim":"Sessions persist state.","task_id":"task_c04"}') as Record<
      string,
      unknown
    >;
    expect(hashOf(reordered)).toBe(hashOf(args));
    expect(hashOf({ ...args, limit: 1 })).toBe(hashOf(args));
  });

  it("changes with any value, including a string's Unicode normalization form or an invisible character", () => {
    const base = hashOf({ ...args, claim: "café" });
    expect(hashOf({ ...args, claim: "cafe\u0301" })).not.toBe(base); // NFD of the same text
    expect(hashOf({ ...args, claim: "caf\u200Bé" })).not.toBe(base); // zero-width space
    expect(hashOf({ ...args, limit: 2 })).not.toBe(hashOf(args));
    expect(hashOf({ ...args, extra: null })).not.toBe(hashOf(args));
  });

  it("binds the tool contract (name, version, hash), the principal and the resources", () => {
    const base = hashOf(args);
    expect(hashOf(args, { tool: { ...tool, hash: `sha256:${"b".repeat(64)}` } })).not.toBe(base);
    expect(hashOf(args, { tool: { ...tool, version: "1.0.1" } })).not.toBe(base);
    expect(hashOf(args, { principal: { ...alice, subject: "bob" } })).not.toBe(base);
    expect(hashOf(args, { principal: { ...alice, tenant: "globex" } })).not.toBe(base);
    expect(hashOf(args, { resources: [] })).not.toBe(base);
    expect(hashOf(args, { versions: () => "v2" })).not.toBe(base);
    // Roles and session are the principal's current rights, not part of what was approved.
    expect(hashOf(args, { principal: { ...alice, roles: [], session: "s1" } })).toBe(base);
  });

  it("names each resource by its pointer and id, with a null version for unversioned resources", () => {
    expect(planOf({ tool, arguments: args, principal: alice, resources }).resources).toEqual([
      { type: "task", pointer: "/task_id", id: "task_c04", version: null },
    ]);
    const versioned = planOf({
      tool,
      arguments: args,
      principal: alice,
      resources: [...resources, { type: "doc", pointer: "/doc", id: null }],
      versions: () => "v7",
    });
    // A resource the arguments do not name has no version to approve.
    expect(versioned.resources.map((r) => r.version)).toEqual(["v7", null]);
  });
});
