import { readFileSync, statSync, writeFileSync } from "node:fs";
import {
  DatasetError,
  EvaluationError,
  formatReplay,
  formatTable,
  loadDataset,
  openToolsDb,
  parseReplayInput,
  replayProposals,
  ReplayInputError,
  runEvaluation,
  servedResults,
  type RecordedProposal,
} from "@toolgate/eval";
import { RunIdSchema } from "@toolgate/contracts";
import { loadContractFiles, type ToolContractInput } from "@toolgate/registry";
import { CliError } from "./cli-error.js";
import { UsageError } from "./command-line.js";

type Flags = Record<string, string | boolean | undefined>;
type Env = Record<string, string | undefined>;
type Print = (value: unknown, human: () => string) => void;

function required(env: Env, name: string, what: string): string {
  const value = env[name];
  if (!value) throw new UsageError(`${name} is not set (${what})`);
  return value;
}

function positiveInteger(flags: Flags, name: string, fallback: number, max: number): number {
  const raw = flags[name];
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > max) throw new UsageError(`eval: --${name} must be an integer from 1 to ${max}`);
  return n;
}

/** A dataset file, or a usage error saying what is wrong with it (exit 2). */
function dataset(path: string) {
  try {
    return loadDataset(path);
  } catch (error) {
    if (error instanceof DatasetError) throw new UsageError(`eval: ${error.message}`.slice(0, 2000));
    throw error;
  }
}

/** `toolgate eval faults <dataset>`: the executor's `EXECUTOR_FAULTS` that serves the dataset's results. */
export function evalFaults(path: string): string {
  return JSON.stringify({ served: servedResults(dataset(path)) });
}

/** `toolgate eval <dataset> --model …`: every sample as managed runs, the table (or JSON), and the report file. */
export async function evalRun(path: string, flags: Flags, env: Env, print: Print): Promise<void> {
  if (typeof flags.model !== "string") throw new UsageError("eval: --model is required (see toolgate eval --help)");
  const set = dataset(path);
  const repeats = positiveInteger(flags, "repeat", 1, 100);
  const concurrency = positiveInteger(flags, "concurrency", 4, 64);
  let price: number | undefined;
  if (flags["usd-per-1k-tokens"] !== undefined) {
    price = Number(flags["usd-per-1k-tokens"]);
    if (!Number.isFinite(price) || price < 0) throw new UsageError("eval: --usd-per-1k-tokens must be a non-negative number");
  }
  const orchestrator = {
    url: required(env, "TOOLGATE_URL", "the URL of the orchestrator"),
    token: required(env, "TOOLGATE_API_KEY", "the API key the orchestrator knows you by"),
  };
  const audit = { url: required(env, "TOOLGATE_AUDIT_URL", "the URL of the audit service"), token: env.TOOLGATE_AUDIT_TOKEN };
  const policy = env.TOOLGATE_POLICY_URL && env.TOOLGATE_APPROVER_TOKEN ? { url: env.TOOLGATE_POLICY_URL, token: env.TOOLGATE_APPROVER_TOKEN } : undefined;
  if (!policy)
    console.error("eval: TOOLGATE_POLICY_URL or TOOLGATE_APPROVER_TOKEN unset: calls that need a human wait until the run's approval budget stops it");
  const tools = await openToolsDb(
    required(env, "TOOLGATE_EVAL_MONGO_URL", "the executor's MongoDB, where evidence is checked"),
    env.TOOLGATE_EVAL_TOOLS_DB ?? "toolgate_tools",
  );
  try {
    const total = set.samples.length * repeats;
    let done = 0;
    const report = await runEvaluation(
      set,
      { orchestrator, audit, policy, tools: tools.db },
      {
        model: flags.model,
        repeats,
        concurrency,
        usdPer1kTokens: price,
        onRun: (score) => {
          done++;
          if (score.failures.length > 0 || process.stderr.isTTY)
            console.error(`[${done}/${total}] ${score.sample}: ${score.failures.length ? score.failures.join("; ") : "ok"}`);
        },
      },
    );
    if (typeof flags.report === "string") writeFileSync(flags.report, `${JSON.stringify(report, null, 2)}\n`);
    print(report, () => formatTable(report));
  } catch (error) {
    if (error instanceof EvaluationError) throw new CliError(`eval: ${error.code}: ${error.message}`);
    throw error;
  } finally {
    await tools.close();
  }
}

/** `toolgate eval replay`: recorded proposals (a run's, or a file's) against the contracts given. */
export async function evalReplay(flags: Flags, env: Env, print: Print): Promise<void> {
  if (typeof flags.contracts !== "string") throw new UsageError("eval replay: --contracts is required (see toolgate eval replay --help)");
  if ((typeof flags.run === "string") === (typeof flags.file === "string")) throw new UsageError("eval replay: give exactly one of --run and --file");
  let proposals: RecordedProposal[];
  try {
    if (typeof flags.run === "string") {
      if (!RunIdSchema.safeParse(flags.run).success) throw new UsageError("eval replay: --run must be a run id (run_<ULID>)");
      proposals = parseReplayInput(await auditTrail(env, flags.run));
    } else {
      let text: string;
      try {
        text = readFileSync(String(flags.file), "utf8");
      } catch (error) {
        throw new CliError(`eval replay: cannot read ${String(flags.file)}: ${(error as NodeJS.ErrnoException).code ?? "error"}`);
      }
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch {
        throw new UsageError(`eval replay: ${String(flags.file)} is not JSON`);
      }
      proposals = parseReplayInput(value);
    }
  } catch (error) {
    if (error instanceof ReplayInputError) throw new UsageError(`eval replay: ${error.message}`);
    throw error;
  }
  const paths = flags.contracts.split(",").filter((p) => p.length > 0);
  for (const p of paths) {
    try {
      statSync(p);
    } catch {
      throw new UsageError(`eval replay: no such file or directory ${p}`);
    }
  }
  let contracts: ToolContractInput[];
  try {
    contracts = (await loadContractFiles(paths)).map((c) => c.contract as ToolContractInput);
  } catch (error) {
    throw new CliError(`eval replay: the contracts cannot be read: ${(error as Error).message}`);
  }
  let report;
  try {
    report = await replayProposals(proposals, contracts);
  } catch (error) {
    throw new CliError(`eval replay: ${(error as Error).message}`);
  }
  print(report, () => formatReplay(report));
}

async function auditTrail(env: Env, runId: string): Promise<unknown> {
  const base = required(env, "TOOLGATE_AUDIT_URL", "the URL of the audit service");
  let response: Response;
  try {
    response = await fetch(`${base.replace(/\/$/, "")}/v1/runs/${encodeURIComponent(runId)}/events`, {
      headers: env.TOOLGATE_AUDIT_TOKEN ? { authorization: `Bearer ${env.TOOLGATE_AUDIT_TOKEN}` } : {},
    });
  } catch {
    throw new CliError(`cannot reach the audit service at ${base} (TOOLGATE_AUDIT_URL)`);
  }
  if (!response.ok) throw new CliError(`the audit service answered HTTP ${response.status} for ${runId}`);
  return response.json();
}
