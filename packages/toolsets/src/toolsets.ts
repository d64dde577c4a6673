import type { ToolContractInput, ToolDefinition } from "@toolgate/registry";
import { MongoEvidenceStore, researchContracts, researchTools, type ResearchFaults } from "@toolgate/research-tools";
import type { Db } from "mongodb";
import { z } from "zod";
import { benchContracts, benchTools } from "./bench-tools.js";
import { EffectLedger } from "./effect-ledger.js";

/** Names of the tool sets a deployment can enable. */
export const ToolsetNameSchema = z.enum(["research", "bench"]);
export type ToolsetName = z.infer<typeof ToolsetNameSchema>;

/** Contracts of the named tool sets: what policy validates and the orchestrator offers to models. */
export function toolsetContracts(names: readonly ToolsetName[]): ToolContractInput[] {
  return names.flatMap((name) => (name === "research" ? researchContracts : benchContracts));
}

export interface ToolsetDependencies {
  /** Database the tools keep their own data in (evidence, effect ledger). */
  db: Db;
  /** Executor instance id, recorded with every ledger effect. */
  executorId: string;
  faults?: ResearchFaults;
}

/** Contracts bound to implementations, for the executor; creates the indexes the tools rely on. */
export async function toolsetDefinitions(names: readonly ToolsetName[], deps: ToolsetDependencies): Promise<ToolDefinition[]> {
  const definitions: ToolDefinition[] = [];
  for (const name of names) {
    if (name === "research") {
      const evidence = new MongoEvidenceStore(deps.db);
      await evidence.ensureIndexes();
      definitions.push(...researchTools({ evidence, ...(deps.faults ? { faults: deps.faults } : {}) }));
    } else {
      definitions.push(...benchTools(new EffectLedger(deps.db, deps.executorId)));
    }
  }
  return definitions;
}
