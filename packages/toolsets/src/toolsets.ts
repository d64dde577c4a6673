import type { ToolContractInput, ToolDefinition } from "@toolgate/registry";
import { MongoEvidenceStore, researchContracts, researchTools, type ResearchFaults } from "@toolgate/research-tools";
import type { Db } from "mongodb";
import type * as TestToolsets from "@toolgate/test-toolsets";
import { z } from "zod";
import { mcpExampleContracts } from "./mcp-example-tools.js";
import { operationContracts, operationTools, type OperationControl } from "./operation-tools.js";

/**
 * Names of the tool sets an executor can enable: `research` (the C04 tools), `operations` (get_operation /
 * cancel_operation), `mcp_examples` (tools of two official MCP servers), and, only where the package
 * `@toolgate/test-toolsets` is installed (a development checkout, never the production image), `bench`
 * (benchmark tools), `chaos` (misbehaving tools for the executor's tests) and `conformance` (the MCP conformance suite's
 * fixture tools).
 */
export const ToolsetNameSchema = z.enum(["research", "bench", "operations", "mcp_examples", "chaos", "conformance"]);
export type ToolsetName = z.infer<typeof ToolsetNameSchema>;

/**
 * The tool sets whose contracts are Toolgate's own and held to the contract linter (`pnpm lint:contracts`, and
 * `test/repo-contracts-poison.test.ts`): every set but `conformance`, whose tool names (`test_simple_text`, …)
 * the MCP conformance suite dictates and the linter rightly refuses for real tools.
 */
export const LINTED_TOOLSETS: readonly ToolsetName[] = ToolsetNameSchema.options.filter((name) => name !== "conformance");

type ProductionToolset = Exclude<ToolsetName, TestToolset>;
type TestToolset = "bench" | "chaos" | "conformance";
const TEST_TOOLSETS: readonly ToolsetName[] = ["bench", "chaos", "conformance"];

const contractsByName: Record<ProductionToolset, ToolContractInput[]> = {
  research: researchContracts,
  operations: operationContracts,
  mcp_examples: mcpExampleContracts,
};

/** A tool set named in the configuration that this installation does not have. */
export class ToolsetUnavailableError extends Error {
  readonly code = "TOOLSET_UNAVAILABLE";
  constructor(names: readonly string[], options?: ErrorOptions) {
    super(`tool sets ${names.join(", ")} are for tests and benchmarks and are not installed here (package @toolgate/test-toolsets)`, options);
    this.name = "ToolsetUnavailableError";
  }
}

/** The test tool sets' module, loaded only when one is enabled; absent from a production installation. */
async function testToolsets(names: readonly ToolsetName[]): Promise<typeof TestToolsets | undefined> {
  const wanted = names.filter((n) => TEST_TOOLSETS.includes(n));
  if (wanted.length === 0) return undefined;
  try {
    return await import("@toolgate/test-toolsets");
  } catch (error) {
    throw new ToolsetUnavailableError(wanted, { cause: error });
  }
}

const isTestToolset = (name: ToolsetName): name is TestToolset => TEST_TOOLSETS.includes(name);

/**
 * Contracts of the named tool sets: what the executor publishes to the contract catalog, from which policy
 * validates and the orchestrator offers tools to models. Throws {@link ToolsetUnavailableError} for a test
 * tool set that is not installed.
 */
export async function toolsetContracts(names: readonly ToolsetName[]): Promise<ToolContractInput[]> {
  const unique = [...new Set(names)];
  const tests = await testToolsets(unique);
  return unique.flatMap((name) => (isTestToolset(name) ? tests!.testToolsetContracts([name]) : contractsByName[name]));
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
  executions?: (tool: string, repeated: boolean) => void;
}

/**
 * In-process implementations of the named tool sets, for the executor; creates the indexes the tools rely on.
 * Tools behind HTTP or MCP have a contract but no definition here. Throws when `operations` is enabled
 * without {@link ToolsetDependencies.operations}, and {@link ToolsetUnavailableError} for a test tool set that
 * is not installed.
 */
export async function toolsetDefinitions(names: readonly ToolsetName[], deps: ToolsetDependencies): Promise<ToolDefinition[]> {
  const unique = [...new Set(names)];
  const definitions: ToolDefinition[] = [];
  const tests = await testToolsets(unique);
  const wantedTests = unique.filter(isTestToolset);
  if (tests && wantedTests.length > 0)
    definitions.push(
      ...tests.testToolsetDefinitions(wantedTests, { db: deps.db, executorId: deps.executorId, ...(deps.executions ? { executions: deps.executions } : {}) }),
    );
  for (const name of unique) {
    switch (name) {
      case "research": {
        const evidence = new MongoEvidenceStore(deps.db);
        await evidence.ensureIndexes();
        definitions.push(...researchTools({ evidence, ...(deps.faults ? { faults: deps.faults } : {}) }));
        break;
      }
      case "operations":
        if (!deps.operations) throw new TypeError("the operations tool set needs the executor's operation control");
        definitions.push(...operationTools(deps.operations));
        break;
      case "mcp_examples":
      case "bench":
      case "chaos":
        break;
    }
  }
  return definitions;
}
