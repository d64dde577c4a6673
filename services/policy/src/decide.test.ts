import type { Principal } from "@toolgate/contracts";
import { ToolRegistry, type ToolContractInput } from "@toolgate/registry";
import { describe, expect, it } from "vitest";
import { decide, type Verdict } from "./decide.js";
import { ALICE, BOB, compiled, proposal, researchContracts } from "./test-fixtures.js";

const search = { query: "agent state management", source_type: "official", limit: 3 };
const save = (taskId: string) => ({ task_id: taskId, claim: "Sessions persist state.", source_url: "https://example.test/s" });

/** A high-risk write, and a tool whose contract always wants a human, next to the research tools. */
const wire: ToolContractInput = {
  ...researchContracts.find((c) => c.name === "save_evidence")!,
  name: "wire_money",
  description: "Sends money to an account; a high-risk external effect used by the policy tests only.",
  risk: "high",
  side_effect: "external",
  approval: "never",
  resources: [],
};
const publish: ToolContractInput = {
  ...wire,
  name: "publish_report",
  risk: "low",
  approval: "always",
  description: "Publishes the report; the policy tests' always-approve tool.",
};
const registry = ToolRegistry.from([...researchContracts, wire, publish]);
const extraTools = `@id("researchers-use-test-tools")
permit (principal in Role::"researcher", action == Action::"call", resource)
when { [Tool::"wire_money", Tool::"publish_report"].contains(resource) };`;
const policies = compiled({ "test-tools.cedar": extraTools });
const WEDNESDAY_10 = new Date("2026-03-04T10:00:00Z");
const WEDNESDAY_03 = new Date("2026-03-04T03:00:00Z");

const decideAt = (p: ReturnType<typeof proposal>, at = WEDNESDAY_10, set = policies): Verdict => decide(p, registry, set, at);

describe("structural layer", () => {
  it("authorizes a valid call with normalized arguments whose hash ignores key order", () => {
    const verdict = decideAt(proposal("search_sources", search));
    expect(verdict.kind).toBe("authorized");
    if (verdict.kind !== "authorized") return;
    expect(verdict.arguments).toEqual(search);
    expect(verdict.reasons).toEqual(["call search_sources: permitted by researchers-use-research-tools"]);
    const reordered = decideAt(proposal("search_sources", `{"limit":3.0,"source_type":"official","query":"agent state management"}`));
    expect(reordered.kind === "authorized" && reordered.argsHash).toBe(verdict.argsHash);
  });

  it("rejects an unknown tool, limit 50 (pointer /limit), an unknown field, bad JSON, duplicate keys and coerced types", () => {
    expect(decideAt(proposal("delete_everything", {}))).toMatchObject({ kind: "rejected", result: { error: { code: "UNKNOWN_TOOL" }, retryable: false } });
    expect(decideAt(proposal("search_sources", { ...search, limit: 50 }))).toMatchObject({
      result: { error: { code: "INVALID_ARGUMENTS", details: { violations: [{ pointer: "/limit" }] } } },
    });
    expect(decideAt(proposal("search_sources", { ...search, force: true }))).toMatchObject({
      result: { error: { code: "INVALID_ARGUMENTS", details: { violations: [{ pointer: "/force" }] } } },
    });
    expect(decideAt(proposal("search_sources", "{query:"))).toMatchObject({ result: { error: { code: "INVALID_JSON" } } });
    expect(decideAt(proposal("search_sources", '{"query":"agent state","query":"x","source_type":"any","limit":1}'))).toMatchObject({
      result: { error: { code: "INVALID_JSON" } },
    });
    expect(decideAt(proposal("search_sources", { ...search, limit: "3" }))).toMatchObject({ result: { error: { code: "INVALID_ARGUMENTS" } } });
  });
});

describe("tool level", () => {
  it("denies by default: a principal without a role, and a tool no policy names", () => {
    const bob = decideAt(proposal("search_sources", search, { principal: BOB }));
    expect(bob).toMatchObject({ kind: "denied", result: { error: { code: "PERMISSION_DENIED", message: "you are not allowed to use search_sources" } } });
    expect(bob.kind === "denied" && bob.reasons).toEqual(["call search_sources: no policy permits it (deny by default)"]);
    const repoOnly = compiled();
    expect(decideAt(proposal("wire_money", { ...save("task_c04") }), WEDNESDAY_10, repoOnly)).toMatchObject({ kind: "denied" });
  });

  it("ignores identity claims in the arguments: they are data, and not even valid data", () => {
    const claims = { ...save("task_c04"), user_id: "alice", tenant_id: "acme" };
    expect(decideAt(proposal("save_evidence", claims, { principal: BOB }))).toMatchObject({
      kind: "rejected",
      result: { error: { code: "INVALID_ARGUMENTS" } },
    });
  });

  it("requires approval for an always-approve contract, and for a high-risk tool outside office hours", () => {
    const always = decideAt(proposal("publish_report", save("task_c04")));
    expect(always).toMatchObject({ kind: "approval_required" });
    expect(always.kind === "approval_required" && always.reasons).toContain("call publish_report: approval required by contract-requires-approval");
    expect(decideAt(proposal("wire_money", save("task_c04")), WEDNESDAY_10).kind).toBe("authorized");
    const night = decideAt(proposal("wire_money", save("task_c04")), WEDNESDAY_03);
    expect(night).toMatchObject({ kind: "approval_required", reasons: ["call wire_money: approval required by high-risk-office-hours"] });
    const sunday = decideAt(proposal("wire_money", save("task_c04")), new Date("2026-03-08T10:00:00Z"));
    expect(sunday.kind).toBe("approval_required");
  });

  it("denies when a policy cannot be evaluated (fail closed)", () => {
    const overflowing = compiled({
      "overflow.cedar": `@id("overflow") forbid (principal, action == Action::"call", resource) when { context.now * 9223372036854775807 > 0 };`,
    });
    const verdict = decideAt(proposal("search_sources", search), WEDNESDAY_10, overflowing);
    expect(verdict.kind).toBe("denied");
    expect(verdict.kind === "denied" && verdict.reasons[0]).toMatch(/policy evaluation failed .*overflow/);
  });
});

describe("resource level", () => {
  it("lets a principal write into the task of its own run", () => {
    const verdict = decideAt(proposal("save_evidence", save("task_c04"), { taskId: "task_c04" }));
    expect(verdict).toMatchObject({ kind: "authorized" });
    expect(verdict.kind === "authorized" && verdict.reasons).toEqual([
      "call save_evidence: permitted by researchers-use-research-tools",
      "write task at /task_id: permitted by own-run-task",
    ]);
  });

  it("denies another task's id exactly as it denies a task that does not exist", () => {
    const listedForeign = decideAt(proposal("save_evidence", save("task_acme_board"), { taskId: "task_c04" }));
    const missing = decideAt(proposal("save_evidence", save("task_never_created"), { taskId: "task_c04" }));
    // Even as the run's own task, a listed task alice is not a member of is refused like a missing one.
    const foreignRunTask = decideAt(proposal("save_evidence", save("task_acme_board"), { taskId: "task_acme_board" }));
    for (const verdict of [listedForeign, missing, foreignRunTask]) {
      expect(verdict.kind).toBe("denied");
      if (verdict.kind !== "denied") return;
      const { call_id: _, ...result } = verdict.result;
      expect(result).toEqual({
        ok: false,
        error: {
          code: "PERMISSION_DENIED",
          message: "you are not allowed to use save_evidence on the task named at /task_id",
          details: { pointer: "/task_id" },
        },
        retryable: false,
      });
      expect(verdict.reasons).toEqual(["write task at /task_id: no policy permits it (deny by default)"]);
    }
  });

  it("lets a listed task's member write into it from a run on it, not a member of another tenant", () => {
    const dana: Principal = { tenant: "acme", subject: "dana", roles: ["researcher"] };
    expect(decideAt(proposal("save_evidence", save("task_acme_board"), { principal: dana, taskId: "task_acme_board" })).kind).toBe("authorized");
    const impostor: Principal = { tenant: "globex", subject: "dana", roles: ["researcher"] };
    expect(decideAt(proposal("save_evidence", save("task_acme_board"), { principal: impostor, taskId: "task_acme_board" })).kind).toBe("denied");
  });

  it("checks the tool before the resource, so a principal without the tool learns nothing about the task", () => {
    const verdict = decideAt(proposal("save_evidence", save("task_acme_board"), { principal: BOB }));
    expect(verdict).toMatchObject({ kind: "denied", result: { error: { message: "you are not allowed to use save_evidence" } } });
  });
});

describe("taint (Rule of Two)", () => {
  it("requires approval for a consequential call in a tainted run, and says why", () => {
    const verdict = decideAt(proposal("save_evidence", save("task_c04"), { tainted: true }));
    expect(verdict).toMatchObject({ kind: "approval_required" });
    expect(verdict.kind === "approval_required" && verdict.reasons).toEqual([
      "call save_evidence: approval required by rule-of-two",
      "write task at /task_id: permitted by own-run-task",
    ]);
  });

  it("leaves reads of a tainted run alone and refuses a high-risk effect outright", () => {
    expect(decideAt(proposal("search_sources", search, { tainted: true })).kind).toBe("authorized");
    const wired = decideAt(proposal("wire_money", save("task_c04"), { tainted: true }));
    // The reason names what no approval can lift.
    expect(wired).toMatchObject({ kind: "denied", reasons: ["call wire_money: forbidden by rule-of-two-high-risk"] });
  });

  it("is what the policy says: without the rule-of-two file a tainted save is authorized", () => {
    const relaxed = compiled({ "rule-of-two.cedar": null });
    expect(decideAt(proposal("save_evidence", save("task_c04"), { tainted: true }), WEDNESDAY_10, relaxed).kind).toBe("authorized");
  });

  it("treats a proposal without taint information as untainted but never trusts the arguments for it", () => {
    const p = proposal("save_evidence", save("task_c04"));
    const { taint: _, ...payload } = p.payload;
    expect(decideAt({ ...p, payload }).kind).toBe("authorized");
  });
});

it("gives every decision the policy version it was made under", () => {
  expect(policies.version).toMatch(/^cedar-[0-9a-f]{12}\+test-tools\.cedar$/);
  expect(ALICE.roles).toEqual(["researcher"]);
});
