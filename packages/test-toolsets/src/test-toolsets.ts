import type { ToolContractInput, ToolDefinition } from "@toolgate/registry";
import type { Db } from "mongodb";
import { benchContracts, benchTools, ExecutionCounter, type ExecutionReport } from "./bench-tools.js";
import { chaosContracts, chaosTools } from "./chaos-tools.js";
import { conformanceContracts, conformanceTools } from "./conformance-tools.js";
import { EffectLedger } from "./effect-ledger.js";

/** `bench` (benchmark tools), `chaos` (misbehaving tools for the executor's tests) and `conformance` (the MCP conformance suite's fixtures). */
export const TEST_TOOLSET_NAMES = ["bench", "chaos", "conformance"] as const;
export type TestToolsetName = (typeof TEST_TOOLSET_NAMES)[number];

const contractsByName: Record<TestToolsetName, ToolContractInput[]> = { bench: benchContracts, chaos: chaosContracts, conformance: conformanceContracts };

export function testToolsetContracts(names: readonly TestToolsetName[]): ToolContractInput[] {
  return [...new Set(names)].flatMap((name) => contractsByName[name]);
}

export interface TestToolsetDependencies {
  /** Database the tools keep their own data in (the effect ledger). */
  db: Db;
  /** Executor instance id, recorded with every ledger effect. */
  executorId: string;
  /** Told of every execution of a tool that counts its executions instead of writing (`bench_noop`). */
  executions?: ExecutionReport;
}

export function testToolsetDefinitions(names: readonly TestToolsetName[], deps: TestToolsetDependencies): ToolDefinition[] {
  const ledger = new EffectLedger(deps.db, deps.executorId);
  return [...new Set(names)].flatMap((name) =>
    name === "bench"
      ? benchTools(ledger, deps.executions ? new ExecutionCounter(deps.executions) : undefined)
      : name === "chaos"
        ? chaosTools(deps.db, ledger)
        : conformanceTools(),
  );
}
