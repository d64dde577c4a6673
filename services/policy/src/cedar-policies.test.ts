import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ToolRegistry } from "@toolgate/registry";
import { afterAll, describe, expect, it } from "vitest";
import { authorizeApproval } from "./authorization.js";
import { CedarPolicies } from "./cedar-policies.js";
import { policyDirFingerprint, PolicyLoadError, readPolicyDir } from "./policy-bundle.js";
import { ALICE, BOB, CAROL, compiled, policyBundle, REPO_POLICY_DIR, researchContracts } from "./test-fixtures.js";

const registry = ToolRegistry.from(researchContracts);
const saveEvidence = registry.get("save_evidence")!;
const now = new Date("2026-03-04T10:00:00Z");

describe("who may approve", () => {
  const policies = compiled();
  const may = (approver: typeof ALICE, requester = ALICE, tool = saveEvidence) =>
    authorizeApproval(policies, { approver, requester, tool, tainted: true, now });

  it("an approver of the requester's tenant, with the policy that permitted it as the reason", () => {
    expect(may(CAROL)).toEqual({ allowed: true, reasons: ["approve save_evidence for acme/alice: permitted by approvers-approve-in-their-tenant"] });
  });

  it("not a principal without the approver role, not an approver of another tenant, never the requester itself", () => {
    expect(may(BOB).allowed).toBe(false);
    expect(may({ ...CAROL, tenant: "globex" }).allowed).toBe(false);
    const selfApprover = { ...ALICE, roles: ["researcher", "approver"] };
    expect(may(selfApprover, selfApprover)).toEqual({
      allowed: false,
      reasons: ["approve save_evidence for acme/alice: forbidden by no-self-approval"],
    });
  });

  it("high-risk tools only by a senior approver (a role whose parent in entities.json is approver)", () => {
    const risky = ToolRegistry.from([{ ...researchContracts.find((c) => c.name === "save_evidence")!, risk: "high" }]).get("save_evidence")!;
    expect(may(CAROL, ALICE, risky).allowed).toBe(false);
    expect(may({ ...CAROL, roles: ["senior_approver"] }, ALICE, risky).allowed).toBe(true);
  });
});

describe("loading a policy directory", () => {
  const dirs: string[] = [];
  afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

  it("loads the repository's set and versions it by content", () => {
    const bundle = readPolicyDir(REPO_POLICY_DIR);
    expect(bundle.policies.map((p) => p.file)).toEqual(["approvals.cedar", "resources.cedar", "rule-of-two.cedar", "tools.cedar"]);
    expect(CedarPolicies.compile(bundle).version).toBe(bundle.version);
    expect(bundle.version).toMatch(/^cedar-[0-9a-f]{12}$/);
    const dir = mkdtempSync(join(tmpdir(), "tg-policy-"));
    dirs.push(dir);
    for (const f of ["schema.cedarschema", "entities.json", ...bundle.policies.map((p) => p.file)]) {
      writeFileSync(
        join(dir, f),
        f.endsWith(".cedar") ? bundle.policies.find((p) => p.file === f)!.text : f === "entities.json" ? bundle.entities : bundle.schema,
      );
    }
    const before = policyDirFingerprint(dir);
    const copy = readPolicyDir(dir);
    writeFileSync(join(dir, "extra.cedar"), `@id("x") permit (principal == User::"acme/x", action == Action::"call", resource);`);
    expect(policyDirFingerprint(dir)).not.toBe(before);
    expect(readPolicyDir(dir).version).not.toBe(copy.version);
  });

  const refused: [string, Record<string, string | null>, RegExp][] = [
    ["a syntax error", { "tools.cedar": "permit (principal, action, resource" }, /tools\.cedar/],
    ["a policy without @id", { "x.cedar": 'permit (principal, action == Action::"call", resource);' }, /@id/],
    ["an @id used twice", { "x.cedar": '@id("rule-of-two") permit (principal, action == Action::"call", resource);' }, /used twice/],
    [
      "an attribute the schema does not have",
      { "x.cedar": '@id("x") permit (principal, action == Action::"call", resource) when { context.is_admin };' },
      /validate/,
    ],
    [
      "an unguarded optional attribute",
      { "x.cedar": '@id("x") permit (principal, action == Action::"write", resource) when { resource.tenant == "acme" };' },
      /validate/,
    ],
    ["entities of the wrong shape", { "entities.json": '[{"uid":{"type":"Task","id":"t"},"attrs":{"tenant":7},"parents":[]}]' }, /entities\.json/],
    ["quotas with an unknown field", { "quotas.json": '{"quotas":[{"id":"q","tool":"*","limit":1,"window_ms":1000,"burst":2}]}' }, /quotas\.json/],
  ];
  for (const [what, change, message] of refused) {
    it(`refuses ${what}`, () => {
      expect(() => CedarPolicies.compile(policyBundle(change))).toThrow(PolicyLoadError);
      expect(() => CedarPolicies.compile(policyBundle(change))).toThrow(message);
    });
  }

  it("refuses a directory without a schema, entities or policies", () => {
    const dir = mkdtempSync(join(tmpdir(), "tg-policy-"));
    dirs.push(dir);
    expect(() => readPolicyDir(dir)).toThrow(/schema\.cedarschema/);
    expect(() => readPolicyDir(join(dir, "missing"))).toThrow(PolicyLoadError);
  });
});

describe("quota rules", () => {
  it("match the first rule for the principal and tool", () => {
    const rules = compiled({
      "quotas.json": JSON.stringify({
        quotas: [
          { id: "bob-everything", tool: "*", subject: "bob", limit: 1, window_ms: 1000 },
          { id: "researcher-search", tool: "search_sources", role: "researcher", tenant: "acme", limit: 5, window_ms: 60000 },
        ],
      }),
    }).quotas;
    expect(rules.match(BOB, "fetch_document")?.id).toBe("bob-everything");
    expect(rules.match(ALICE, "search_sources")?.id).toBe("researcher-search");
    expect(rules.match(ALICE, "fetch_document")).toBeUndefined();
    expect(rules.match({ ...ALICE, tenant: "globex" }, "search_sources")).toBeUndefined();
  });
});
