import { eventId, newCallId, newRunId, type CallEventOf } from "@toolgate/contracts";
import { ToolRegistry } from "@toolgate/registry";
import { researchContracts } from "@toolgate/research-tools";
import { describe, expect, it } from "vitest";
import { decide } from "./decide.js";
import { Grants } from "./grants.js";

const registry = ToolRegistry.from(researchContracts);
const grants = Grants.parse(JSON.stringify({ grants: [{ tenant: "acme", role: "researcher", tools: ["search_sources", "save_evidence"] }] }));
const alice = { tenant: "acme", subject: "alice", roles: ["researcher"] };

function proposal(tool: string, args: unknown, principal = alice): CallEventOf<"proposed"> {
  const callId = newCallId();
  return {
    v: 1,
    kind: "call",
    id: eventId(callId, "proposed", 1),
    type: "proposed",
    call_id: callId,
    run_id: newRunId(),
    seq: 1,
    attempt: 1,
    time: new Date().toISOString(),
    source: "orchestrator",
    principal,
    payload: {
      provider_call_id: "call_01",
      tool_name: tool,
      arguments_json: typeof args === "string" ? args : JSON.stringify(args),
      context: { task_id: "t1" },
      turn: 0,
    },
  };
}

const search = { query: "agent state management", source_type: "official", limit: 3 };

describe("decide", () => {
  it("authorizes a valid call for a granted principal, with normalized arguments and their hash", () => {
    const verdict = decide(proposal("search_sources", search), registry, grants);
    expect(verdict.kind).toBe("authorized");
    if (verdict.kind !== "authorized") return;
    expect(verdict.arguments).toEqual(search);
    // Key order does not change the hash the approval and the executor bind to.
    const reordered = decide(proposal("search_sources", `{"limit":3,"source_type":"official","query":"agent state management"}`), registry, grants);
    expect(reordered.kind === "authorized" && reordered.argsHash).toBe(verdict.argsHash);
  });

  it("rejects an unknown tool", () => {
    const verdict = decide(proposal("delete_everything", {}), registry, grants);
    expect(verdict).toMatchObject({ kind: "rejected", result: { error: { code: "UNKNOWN_TOOL" }, retryable: false } });
  });

  it("rejects limit 50 with a JSON pointer to /limit", () => {
    const verdict = decide(proposal("search_sources", { ...search, limit: 50 }), registry, grants);
    expect(verdict).toMatchObject({ kind: "rejected", result: { error: { code: "INVALID_ARGUMENTS", details: { violations: [{ pointer: "/limit" }] } } } });
  });

  it("rejects an unknown field such as force: true", () => {
    const verdict = decide(proposal("search_sources", { ...search, force: true }), registry, grants);
    expect(verdict).toMatchObject({ kind: "rejected", result: { error: { code: "INVALID_ARGUMENTS", details: { violations: [{ pointer: "/force" }] } } } });
  });

  it("rejects arguments that are not JSON, or not an object", () => {
    expect(decide(proposal("search_sources", "{query:"), registry, grants)).toMatchObject({ result: { error: { code: "INVALID_JSON" } } });
    expect(decide(proposal("search_sources", "[1,2]"), registry, grants)).toMatchObject({ result: { error: { code: "INVALID_ARGUMENTS" } } });
  });

  it("does not coerce types: a string limit is invalid", () => {
    const verdict = decide(proposal("search_sources", { ...search, limit: "3" }), registry, grants);
    expect(verdict).toMatchObject({ kind: "rejected", result: { error: { code: "INVALID_ARGUMENTS" } } });
  });

  it("denies a principal without a grant, and a granted principal a tool outside its grant", () => {
    const bob = { tenant: "acme", subject: "bob", roles: [] };
    expect(decide(proposal("search_sources", search, bob), registry, grants)).toMatchObject({
      kind: "denied",
      result: { error: { code: "PERMISSION_DENIED" } },
    });
    expect(decide(proposal("fetch_document", { url: "https://example.test/a" }), registry, grants)).toMatchObject({ kind: "denied" });
    const otherTenant = { ...alice, tenant: "globex" };
    expect(decide(proposal("search_sources", search, otherTenant), registry, grants)).toMatchObject({ kind: "denied" });
  });
});
