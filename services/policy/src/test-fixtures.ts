import { fileURLToPath } from "node:url";
import { eventId, newCallId, newRunId, type CallEventOf, type Principal } from "@toolgate/contracts";
import { loadContractModule, type ToolContractInput } from "@toolgate/registry";
import { CedarPolicies } from "./cedar-policies.js";
import { readPolicyDir, type PolicyBundle } from "./policy-bundle.js";

/** The repository's policy set (infra/policy), which the tests hold to its documented behaviour. */
export const REPO_POLICY_DIR = fileURLToPath(new URL("../../../infra/policy/", import.meta.url));

/**
 * The research tools' contracts, read from their built module by path as the contracts CLI reads one: policy
 * depends on no tool package, in its tests no more than in production.
 */
export const researchContracts: ToolContractInput[] = (
  await loadContractModule(fileURLToPath(new URL("../../../packages/research-tools/dist/index.js", import.meta.url)))
)
  .map((found) => found.contract as ToolContractInput)
  .filter((contract, i, all) => all.findIndex((c) => c.name === contract.name) === i);

/** The repository's policy set, with files added or replaced (`null` removes one). */
export function policyBundle(changes: Record<string, string | null> = {}): PolicyBundle {
  const base = readPolicyDir(REPO_POLICY_DIR);
  const policies = new Map(base.policies.map((p) => [p.file, p.text]));
  let { schema, entities, quotas } = base;
  for (const [file, text] of Object.entries(changes)) {
    if (file === "schema.cedarschema") schema = text ?? "";
    else if (file === "entities.json") entities = text ?? "[]";
    else if (file === "quotas.json") quotas = text ?? undefined;
    else if (text === null) policies.delete(file);
    else policies.set(file, text);
  }
  return {
    version: `${base.version}+${Object.keys(changes).join(",")}`,
    schema,
    entities,
    quotas,
    policies: [...policies].map(([file, text]) => ({ file, text })),
  };
}

/** Compiles a bundle with request validation on: a request built unlike the schema says fails the test. */
export function compiled(changes: Record<string, string | null> = {}): CedarPolicies {
  return CedarPolicies.compile(policyBundle(changes), { validateRequests: true });
}

export const ALICE: Principal = { tenant: "acme", subject: "alice", roles: ["researcher"] };
export const BOB: Principal = { tenant: "acme", subject: "bob", roles: [] };
export const CAROL: Principal = { tenant: "acme", subject: "carol", roles: ["approver"] };

/** A `proposed` event as the orchestrator publishes it. */
export function proposal(tool: string, args: unknown, options: { principal?: Principal; taskId?: string; tainted?: boolean } = {}): CallEventOf<"proposed"> {
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
    principal: options.principal ?? ALICE,
    payload: {
      provider_call_id: "call_01",
      tool_name: tool,
      arguments_json: typeof args === "string" ? args : JSON.stringify(args),
      context: options.taskId === undefined ? { task_id: "task_c04" } : { task_id: options.taskId },
      turn: 0,
      taint: options.tainted ? { tainted: true, sources: ["fetch_document"] } : { tainted: false, sources: [] },
    },
  };
}
