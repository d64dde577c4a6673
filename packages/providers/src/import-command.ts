import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { parseStrictJson } from "@toolgate/registry";
import { importTools } from "./index.js";
import { PROVIDERS, type ProviderName } from "./types.js";

export const IMPORT_USAGE = `usage: toolgate-import --provider <${PROVIDERS.join("|")}> <tools.json> --out <dir> [--force]

Turns a provider's tool list into draft contract files, one <name>.json per tool, and prints what each draft
assumed and what the contract linter wants completed before it can be published.

  --provider   the dialect of the tool list: Chat Completions or Responses tools, Anthropic tools, Gemini
               function declarations (or Tools), an MCP tools/list result (or its tools)
  --out        the directory to write the drafts to (created if missing)
  --force      overwrite drafts that already exist`;

/** Where the command writes: its output lines and its error lines. */
export interface CommandOutput {
  out(line: string): void;
  err(line: string): void;
}

function isProvider(value: string): value is ProviderName {
  return (PROVIDERS as readonly string[]).includes(value);
}

/**
 * `toolgate-import`: reads a provider's tool list, writes one draft contract per tool and prints the defaults it
 * assumed and the linter's findings. Exit code 0 when every draft was written (findings are the work left), 1 when
 * the list cannot be read or a draft exists already, 2 for a usage error. Never throws for bad input.
 */
export async function runImportCommand(argv: readonly string[], output: CommandOutput): Promise<number> {
  let parsed: ReturnType<typeof parseOptions>;
  try {
    parsed = parseOptions(argv);
  } catch (error) {
    output.err(`${(error as Error).message}\n\n${IMPORT_USAGE}`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    output.out(IMPORT_USAGE);
    return 0;
  }
  const [file, ...extra] = positionals;
  const provider = values.provider;
  if (file === undefined || extra.length > 0 || provider === undefined || values.out === undefined || !isProvider(provider)) {
    output.err(IMPORT_USAGE);
    return 2;
  }
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (error) {
    output.err(`${file}: ${(error as Error).message}`);
    return 1;
  }
  const document = parseStrictJson(text, { maxDepth: 64 });
  if (!document.ok) {
    output.err(`${file}: ${document.error.message}`);
    return 1;
  }
  const imported = importTools(provider, document.value);
  if (!imported.ok) {
    const { code, message, pointer } = imported.error;
    output.err(`${file}: ${code} ${message}${pointer ? ` (at ${pointer})` : ""}`);
    return 1;
  }
  await mkdir(values.out, { recursive: true });
  let errors = 0;
  for (const tool of imported.tools) {
    const target = join(values.out, `${tool.name}.json`);
    try {
      await writeFile(target, `${JSON.stringify(tool.contract, null, 2)}\n`, { flag: values.force ? "w" : "wx" });
    } catch (error) {
      const exists = (error as NodeJS.ErrnoException).code === "EEXIST";
      output.err(exists ? `${target} exists; give --force to overwrite it` : `${target}: ${(error as Error).message}`);
      return 1;
    }
    const renamed = tool.name === tool.original_name ? "" : ` (imported as ${JSON.stringify(tool.original_name)}, kept as an alias)`;
    output.out(`draft ${tool.name}${renamed} → ${target}`);
    for (const assumed of tool.assumed) output.out(`     assumed ${assumed.pointer.padEnd(24)} ${JSON.stringify(assumed.value)}  ${assumed.reason}`);
    for (const finding of tool.findings) {
      if (finding.severity === "error") errors++;
      output.out(`     ${finding.severity.padEnd(7)} ${finding.rule.padEnd(31)} ${finding.pointer || "/"}  ${finding.message}`);
    }
  }
  output.out(`${imported.tools.length} drafts written to ${values.out}; ${errors} lint errors to complete (then: toolgate-contracts lint ${values.out})`);
  return 0;
}

function parseOptions(argv: readonly string[]) {
  return parseArgs({
    args: [...argv],
    allowPositionals: true,
    options: {
      provider: { type: "string" },
      out: { type: "string" },
      force: { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
  });
}
