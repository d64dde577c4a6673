/**
 * Authorization benchmark: decisions per second of `decide` (structural validation + Cedar at tool and resource
 * level) on the repository's policy set, in one process, without NATS or MongoDB. Prints the median of several
 * runs: cold (every principal new, so no Cedar answer can be reused) and warm (the same principals and tools
 * again, as the calls of a run are), overall and per scenario.
 *
 *   node services/policy/dist/bench-decide.js [--runs 7] [--decisions 20000] [--policy-dir infra/policy]
 *     [--contracts packages/toolsets/dist/index.js]
 *
 * The contracts come from a built tool-set module, read by path as the contracts CLI reads one: policy itself
 * depends on no tool package, in the benchmark no more than in production.
 */
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { eventId, newCallId, newRunId, type CallEventOf, type Principal } from "@toolgate/contracts";
import { loadContractModule, ToolRegistry, type ToolContractInput } from "@toolgate/registry";
import { CedarPolicies } from "./cedar-policies.js";
import { decide } from "./decide.js";
import { readPolicyDir } from "./policy-bundle.js";

const { values } = parseArgs({
  options: {
    runs: { type: "string", default: "7" },
    decisions: { type: "string", default: "20000" },
    "policy-dir": { type: "string", default: fileURLToPath(new URL("../../../infra/policy/", import.meta.url)) },
    contracts: { type: "string", default: fileURLToPath(new URL("../../../packages/toolsets/dist/index.js", import.meta.url)) },
  },
});
const runs = Number(values.runs);
const decisions = Number(values.decisions);

let unique = 0;
/** A researcher; `fresh` gives a principal never seen before (a cold Cedar request). */
const researcher = (fresh: boolean): Principal => ({ tenant: "acme", subject: fresh ? `user${++unique}` : "alice", roles: ["researcher"] });
const nobody = (fresh: boolean): Principal => ({ tenant: "acme", subject: fresh ? `user${++unique}` : "bob", roles: [] });
const DOC = "https://example.test/docs/openai-agents-sdk/sessions";

function proposal(tool: string, args: unknown, principal: Principal, tainted: boolean): CallEventOf<"proposed"> {
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
      arguments_json: JSON.stringify(args),
      context: { task_id: "task_bench" },
      turn: 0,
      taint: { tainted, sources: tainted ? ["fetch_document"] : [] },
    },
  };
}

/** What policy sees in a research run: mostly reads, some writes, some denials and approvals. */
const scenarios = [
  {
    name: "read, allowed (1 Cedar request)",
    expect: "authorized",
    weight: 5,
    make: (f: boolean) => proposal("search_sources", { query: "agent state", source_type: "official", limit: 3 }, researcher(f), false),
  },
  {
    name: "write, tool + resource (2)",
    expect: "authorized",
    weight: 3,
    make: (f: boolean) => proposal("save_evidence", { task_id: "task_bench", claim: "c", source_url: DOC }, researcher(f), false),
  },
  {
    name: "tainted write, approval (3)",
    expect: "approval_required",
    weight: 1,
    make: (f: boolean) => proposal("save_evidence", { task_id: "task_bench", claim: "c", source_url: DOC }, researcher(f), true),
  },
  {
    name: "other task, resource denial (3)",
    expect: "denied",
    weight: 1,
    make: (f: boolean) => proposal("save_evidence", { task_id: "task_other", claim: "c", source_url: DOC }, researcher(f), false),
  },
  { name: "no role, tool denial (2)", expect: "denied", weight: 1, make: (f: boolean) => proposal("fetch_document", { url: DOC }, nobody(f), false) },
] as const;

// A module lists a contract once per export that holds it; the registry validates each as it compiles it.
const byVersion = new Map(
  (await loadContractModule(values.contracts)).map(({ contract }) => {
    const { name, version } = contract as ToolContractInput;
    return [`${name}@${version}`, contract as ToolContractInput];
  }),
);
const registry = ToolRegistry.from([...byVersion.values()]);
const policies = CedarPolicies.compile(readPolicyDir(values["policy-dir"]));
const now = new Date("2026-03-04T10:00:00Z");

/** Decisions per second over `inputs`, checking each verdict. */
function rate(inputs: readonly { proposal: CallEventOf<"proposed">; expect: string }[]): number {
  const started = performance.now();
  for (const { proposal: p, expect } of inputs) {
    const verdict = decide(p, registry, policies, now);
    if (verdict.kind !== expect) throw new Error(`expected ${expect}, got ${verdict.kind}`);
  }
  return inputs.length / ((performance.now() - started) / 1000);
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const mix = scenarios.flatMap((s) => Array.from({ length: s.weight }, () => s));

/** `n` proposals: the weighted mix, or one scenario; `fresh` principals make every Cedar request new. */
function inputs(n: number, fresh: boolean, only?: (typeof scenarios)[number]): { proposal: CallEventOf<"proposed">; expect: string }[] {
  const out: { proposal: CallEventOf<"proposed">; expect: string }[] = [];
  for (let i = 0; i < n; i++) {
    const s = only ?? mix[i % mix.length]!;
    out.push({ proposal: s.make(fresh), expect: s.expect });
  }
  return out;
}

function medianRate(n: number, fresh: boolean, only?: (typeof scenarios)[number]): number[] {
  const rates: number[] = [];
  for (let r = 0; r < runs; r++) rates.push(rate(inputs(n, fresh, only)));
  return rates;
}

// Warm-up (JIT, the Wasm engine).
rate(inputs(2_000, true));
rate(inputs(2_000, false));

const fmt = (xs: number[]) =>
  `${String(Math.round(median(xs))).padStart(7)} decisions/s (median of ${xs.length}; min ${Math.round(Math.min(...xs))}, max ${Math.round(Math.max(...xs))})`;
console.log(`policy ${policies.version}, ${decisions} decisions per run, Node ${process.version}`);
console.log(`mixed research workload, cold (no answer reused): ${fmt(medianRate(decisions, true))}`);
console.log(`mixed research workload, warm (repeated requests): ${fmt(medianRate(decisions, false))}`);
for (const s of scenarios) {
  console.log(
    `  cold ${s.name.padEnd(34)} ${String(Math.round(median(medianRate(Math.max(1_000, Math.floor(decisions / 4)), true, s)))).padStart(7)} decisions/s`,
  );
}
