#!/usr/bin/env node
// toolgate-contracts: lint, hash, benchmark and publish tool contracts from files and JavaScript modules.
import { spawn } from "node:child_process";
import { parseArgs } from "node:util";
import { benchmarkValidation, type ValidationCase } from "./bench-validation.js";
import type { Authenticator } from "@nats-io/nats-core";
import { ContractCatalog, type CatalogConnection } from "./contract-catalog.js";
import { loadContractFiles, loadContractModule, type SourcedContract } from "./contract-files.js";
import { lintContracts } from "./contract-lint.js";
import { contractHash, ToolContractSchema, type ToolContractInput } from "./contract.js";
import { ContractCompiler, ContractError, ToolRegistry } from "./registry.js";
import { isSchemaObject } from "./schema-walk.js";

const USAGE = `usage: toolgate-contracts <command> [--module <file.js>]... [<contract file or directory>]...

commands
  lint      check every contract against the contract rules; exit 1 when any has an error
  hash      print each contract's name, version and content hash
  bench     validations per second of one tool's structural layer, valid and invalid inputs
            [--tool search_sources] [--valid '<arguments JSON>'] [--runs 7] [--run-ms 400]
  publish   publish every contract to the catalog stream
            --nats <url> [--stream TOOLGATE_CONTRACTS] [--prefix toolgate.contracts] [--replicas 1]
            (replicas of the stream when publish creates it: the services' STREAM_REPLICAS)
  import    turn a provider's tool list into draft contract files and print what the linter wants completed
            --provider <openai-chat|openai-responses|anthropic|gemini|mcp> <tools.json> --out <dir> [--force]
            (runs toolgate-import from @toolgate/providers)

sources
  --module <file.js>   a built module whose exports are contracts, lists of contracts, or a tool set
                       (toolsetContracts + ToolsetNameSchema); repeatable
  files                JSON or YAML: a contract, a list, or { contracts: [...] }; directories are searched`;

/** The C04 arguments of seed 000, the typical valid input of search_sources. */
const C04_ARGUMENTS = { query: "OpenAI Agents SDK state management official documentation", source_type: "official", limit: 3 };

async function main(argv: string[]): Promise<number> {
  if (argv[0] === "import") return delegateImport(argv.slice(1));
  if (argv[0] === "quarantine") return (await import("./quarantine-cli.js")).quarantineCommand(argv.slice(1));
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      module: { type: "string", multiple: true, default: [] },
      tool: { type: "string", default: "search_sources" },
      valid: { type: "string" },
      runs: { type: "string", default: "7" },
      "run-ms": { type: "string", default: "400" },
      nats: { type: "string" },
      stream: { type: "string" },
      prefix: { type: "string" },
      replicas: { type: "string", default: "1" },
      help: { type: "boolean", short: "h" },
    },
  });
  const [command, ...paths] = positionals;
  if (values.help || command === undefined) {
    console.log(USAGE);
    return command === undefined && !values.help ? 2 : 0;
  }
  const sources = await loadSources(values.module, paths);
  switch (command) {
    case "lint":
      return lint(sources);
    case "hash":
      return hash(sources);
    case "bench":
      return bench(sources, values.tool, values.valid, Number(values.runs), Number(values["run-ms"]));
    case "publish":
      return publish(sources, values.nats, values.stream, values.prefix, Number(values.replicas));
    default:
      console.error(`unknown command ${command}\n\n${USAGE}`);
      return 2;
  }
}

async function loadSources(modules: readonly string[], paths: readonly string[]): Promise<SourcedContract[]> {
  const found: SourcedContract[] = [];
  for (const module of modules) found.push(...(await loadContractModule(module)));
  found.push(...(await loadContractFiles(paths)));
  // One contract exported by several modules (a tool set re-exporting another package's) is checked once.
  const seen = new Set<string>();
  return found.filter(({ contract }) => {
    const parsed = ToolContractSchema.safeParse(contract);
    if (!parsed.success) return true;
    const hash = contractHash(parsed.data);
    if (seen.has(hash)) return false;
    seen.add(hash);
    return true;
  });
}

function lint(sources: readonly SourcedContract[]): number {
  if (sources.length === 0) {
    console.error("no contracts found");
    return 2;
  }
  const reports = lintContracts(sources.map((s) => s.contract));
  let errors = 0;
  reports.forEach((report, i) => {
    const source = sources[i]!.source;
    const status = report.ok ? "ok  " : "FAIL";
    console.log(`${status} ${report.name}@${report.version}  (${source})`);
    for (const finding of report.findings) {
      if (finding.severity === "error") errors++;
      console.log(`     ${finding.severity.padEnd(7)} ${finding.rule.padEnd(31)} ${finding.pointer || "/"}  ${finding.message}`);
    }
  });
  console.log(`${reports.length} contracts, ${errors} errors`);
  return errors > 0 ? 1 : 0;
}

function hash(sources: readonly SourcedContract[]): number {
  const compiler = new ContractCompiler();
  for (const { contract } of sources) {
    const tool = compiler.compile(contract as ToolContractInput);
    console.log(`${tool.ref.name}\t${tool.ref.version}\t${tool.hash}`);
  }
  return 0;
}

function bench(sources: readonly SourcedContract[], toolName: string, validJson: string | undefined, runs: number, runMs: number): number {
  const contract = sources.map((s) => s.contract).find((c) => isSchemaObject(c) && c.name === toolName);
  if (contract === undefined) {
    console.error(`no contract named ${toolName} in the given sources`);
    return 2;
  }
  const registry = ToolRegistry.from([contract as ToolContractInput]);
  const tool = registry.get(toolName)!;
  const valid = validJson === undefined ? (toolName === "search_sources" ? C04_ARGUMENTS : undefined) : (JSON.parse(validJson) as Record<string, unknown>);
  if (valid === undefined) {
    console.error(`give a valid example of ${toolName}'s arguments with --valid '<json>'`);
    return 2;
  }
  const cases = benchmarkCases(tool.contract.input_schema, valid);
  const measured = benchmarkValidation(registry, tool, cases, { runs, runMs });
  console.log(`structural validation of ${tool.ref.name}@${tool.ref.version} (${tool.hash.slice(0, 19)}…), node ${process.version}`);
  console.log(`median of ${runs} runs × ${runMs} ms per case, one core\n`);
  console.log(`${"case".padEnd(40)} ${"outcome".padEnd(18)} ${"bytes".padStart(6)} ${"validations/s".padStart(14)}   runs`);
  for (const m of measured) {
    console.log(
      `${m.label.padEnd(40)} ${m.outcome.padEnd(18)} ${String(m.bytes).padStart(6)} ${m.median.toLocaleString("en-US").padStart(14)}   ${m.perSecond.map((n) => Math.round(n / 1000)).join(" ")} (k)`,
    );
  }
  return 0;
}

/** A valid input and invalid variants of it, one per structural outcome. */
function benchmarkCases(schema: Record<string, unknown>, valid: Record<string, unknown>): ValidationCase[] {
  const text = JSON.stringify(valid);
  const cases: ValidationCase[] = [{ label: "valid", argumentsJson: text }];
  const properties = isSchemaObject(schema.properties) ? schema.properties : {};
  const bounded = Object.entries(properties).find(([, p]) => isSchemaObject(p) && p.type === "integer" && typeof p.maximum === "number");
  if (bounded) {
    const [name, property] = bounded as [string, { maximum: number }];
    const over = property.maximum * 5;
    cases.push({ label: `${name}: ${over} (over its maximum)`, argumentsJson: JSON.stringify({ ...valid, [name]: over }) });
    cases.push({
      label: `${name}: "${String(valid[name])}" (a string, not coerced)`,
      argumentsJson: JSON.stringify({ ...valid, [name]: String(valid[name]) }),
    });
  }
  cases.push({ label: "unknown field force: true", argumentsJson: JSON.stringify({ ...valid, force: true }) });
  const firstKey = Object.keys(valid)[0];
  if (firstKey !== undefined) cases.push({ label: `duplicate key "${firstKey}"`, argumentsJson: `{${JSON.stringify(firstKey)}:null,${text.slice(1)}` });
  cases.push({ label: "truncated JSON", argumentsJson: text.slice(0, -1) });
  return cases;
}

async function publish(
  sources: readonly SourcedContract[],
  url: string | undefined,
  stream: string | undefined,
  prefix: string | undefined,
  replicas: number,
): Promise<number> {
  if (url === undefined) {
    console.error("publish needs --nats <url>");
    return 2;
  }
  // Services refuse a catalog stream whose replicas differ from their STREAM_REPLICAS: create it as they would.
  if (!Number.isInteger(replicas) || replicas < 1 || replicas > 5) {
    console.error("--replicas must be an integer from 1 to 5");
    return 2;
  }
  const reports = lintContracts(sources.map((s) => s.contract));
  if (reports.some((r) => !r.ok)) {
    console.error("refusing to publish: some contracts fail the linter (run `lint` for details)");
    return 1;
  }
  const nc = await connectNats(url);
  try {
    const catalog = await ContractCatalog.connect(nc, {
      resyncIntervalMs: 0,
      replicas,
      ...(stream ? { stream } : {}),
      ...(prefix ? { subjectPrefix: prefix } : {}),
    });
    let failed = 0;
    for (const { contract, source } of sources) {
      const outcome = await catalog.publish(contract as ToolContractInput);
      if (outcome.ok) console.log(`${outcome.created ? "published" : "unchanged"} ${outcome.ref.name}@${outcome.ref.version} ${outcome.ref.hash}`);
      else {
        failed++;
        console.error(`${outcome.code} ${source}: ${outcome.message}`);
      }
    }
    catalog.close();
    return failed > 0 ? 1 : 0;
  } finally {
    await nc.close();
  }
}

/**
 * `import` is the bin of @toolgate/providers, which knows the provider dialects and depends on this package (the
 * other way round would be a cycle): it is run from the PATH with the same arguments.
 */
function delegateImport(args: readonly string[]): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn("toolgate-import", args, { stdio: "inherit" });
    child.on("error", (error: NodeJS.ErrnoException) => {
      console.error(error.code === "ENOENT" ? "import needs toolgate-import (from @toolgate/providers) on the PATH; `pnpm exec` puts it there" : error.message);
      resolve(2);
    });
    child.on("exit", (code, signal) => resolve(code ?? (signal === null ? 2 : 1)));
  });
}

/** The NATS client is loaded only by `publish`, so linting and benchmarks need no NATS package. */
async function connectNats(url: string): Promise<CatalogConnection & { close(): Promise<void> }> {
  const specifier = "@nats-io/transport-node";
  let transport: {
    connect(options: { servers: string[]; name: string; authenticator?: Authenticator }): Promise<CatalogConnection & { close(): Promise<void> }>;
  };
  try {
    transport = (await import(specifier)) as typeof transport;
  } catch (error) {
    throw new ContractError(`publish needs ${specifier} installed next to @toolgate/registry`, { cause: error });
  }
  const { operatorIdentity } = await import("./operator-identity.js");
  return transport.connect({ servers: url.split(","), name: "toolgate-contracts", ...operatorIdentity() });
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    console.error(error instanceof ContractError ? error.message : error);
    process.exitCode = 2;
  },
);
