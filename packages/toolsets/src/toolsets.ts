import type { ToolContractInput, ToolDefinition } from "@toolgate/registry";
import { MongoEvidenceStore, researchContracts, researchTools, type ResearchFaults } from "@toolgate/research-tools";
import type { Db } from "mongodb";
import { z } from "zod";
import { benchContracts, benchTools, ExecutionCounter, type ExecutionReport } from "./bench-tools.js";
import { chaosContracts, chaosTools } from "./chaos-tools.js";
import { EffectLedger } from "./effect-ledger.js";
import { mcpExampleContracts } from "./mcp-example-tools.js";
import { operationContracts, operationTools, type OperationControl } from "./operation-tools.js";

/**
 * Names of the tool sets a deployment can enable: `research` (the C04 tools), `bench` (benchmark tools),
 * `operations` (get_operation / cancel_operation), `mcp_examples` (tools of two official MCP servers) and
 * `chaos` (misbehaving tools for the executor's tests; never in production).
 */
export const ToolsetNameSchema = z.enum(["research", "bench", "operations", "mcp_examples", "chaos"]);
export type ToolsetName = z.infer<typeof ToolsetNameSchema>;

const contractsByName: Record<ToolsetName, ToolContractInput[]> = {
  research: researchContracts,
  bench: benchContracts,
  operations: operationContracts,
  mcp_examples: mcpExampleContracts,
  chaos: chaosContracts,
};

/** Contracts of the named tool sets: what policy validates and the orchestrator offers to models. */
export function toolsetContracts(names: readonly ToolsetName[]): ToolContractInput[] {
  return [...new Set(names)].flatMap((name) => contractsByName[name]);
}

export interface ToolsetDependencies {
  /** Database the tools keep their own data in (evidence, effect ledger). */
  db: Db;
  /** Executor instance id, recorded with every ledger effect. */
  executorId: string;
  faults?: ResearchFaults;
  /** The executor's operation tracking, for the `operations` tool set. */
  operations?: OperationControl;
  /** Told of every execution of a tool that counts its executions instead of writing (`bench_noop`). */
  executions?: ExecutionReport;
}

/**
 * In-process implementations of the named tool sets, for the executor; creates the indexes the tools rely on.
 * Tools behind HTTP or MCP have a contract but no definition here. Throws when `operations` is enabled
 * without {@link ToolsetDependencies.operations}.
 */
export async function toolsetDefinitions(names: readonly ToolsetName[], deps: ToolsetDependencies): Promise<ToolDefinition[]> {
  const definitions: ToolDefinition[] = [];
  for (const name of new Set(names)) {
    switch (name) {
      case "research": {
        const evidence = new MongoEvidenceStore(deps.db);
        await evidence.ensureIndexes();
        definitions.push(...researchTools({ evidence, ...(deps.faults ? { faults: deps.faults } : {}) }));
        break;
      }
      case "bench":
        definitions.push(...benchTools(new EffectLedger(deps.db, deps.executorId), deps.executions ? new ExecutionCounter(deps.executions) : undefined));
        break;
      case "operations":
        if (!deps.operations) throw new TypeError("the operations tool set needs the executor's operation control");
        definitions.push(...operationTools(deps.operations));
        break;
      case "chaos":
        definitions.push(...chaosTools(deps.db, new EffectLedger(deps.db, deps.executorId)));
        break;
      case "mcp_examples":
        break;
    }
  }
  return definitions;
}
