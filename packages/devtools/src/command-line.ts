import { parseArgs, type ParseArgsConfig } from "node:util";

type Options = NonNullable<ParseArgsConfig["options"]>;
type WithHelp<O extends Options> = O & { help: { type: "boolean"; default: false } };
type Values<O extends Options> = ReturnType<typeof parseArgs<{ options: WithHelp<O> }>>["values"];

/** How a tool's command line went: its values, or what to print and the exit code. */
export type CommandLine<O extends Options> = { ok: true; values: Values<O> } | { ok: false; output: string; exitCode: 0 | 2 };

/**
 * Reads a devtools command line: `--help` gives the usage (exit 0); an unknown option, a missing value or a
 * stray argument gives a one-line error and the usage (exit 2), never a stack trace.
 */
export function readCommandLine<O extends Options>(tool: string, usage: string, options: O, argv = process.argv.slice(2)): CommandLine<O> {
  const all = { ...options, help: { type: "boolean", default: false } } as WithHelp<O>;
  let values: Values<O>;
  try {
    values = parseArgs({ args: argv, options: all, strict: true, allowPositionals: false }).values;
  } catch (error) {
    return { ok: false, output: `${tool}: ${(error as Error).message}\n${usage}`, exitCode: 2 };
  }
  if ((values as { help?: boolean }).help === true) return { ok: false, output: usage, exitCode: 0 };
  return { ok: true, values };
}

/** {@link readCommandLine} for a tool's entry point: prints and exits unless the command line is one to run. */
export function commandLineOrExit<O extends Options>(tool: string, usage: string, options: O): Values<O> {
  const line = readCommandLine(tool, usage, options);
  if (line.ok) return line.values;
  (line.exitCode === 0 ? console.log : console.error)(line.output);
  process.exit(line.exitCode);
}

/**
 * Reads an option holding environment variables as comma-separated `NAME=value` pairs, each name starting with
 * `prefix` (upper case, digits, `_`): the variables, or the one-line reason the list is refused.
 */
export function envPairs(list: string, prefix: string): { ok: true; env: Record<string, string> } | { ok: false; error: string } {
  const env: Record<string, string> = {};
  for (const pair of list.split(",")) {
    if (pair.trim() === "") continue;
    const at = pair.indexOf("=");
    const name = at > 0 ? pair.slice(0, at).trim() : "";
    if (!name.startsWith(prefix) || !/^[A-Z0-9_]+$/.test(name)) {
      return { ok: false, error: `expected ${prefix}NAME=value pairs, comma-separated; got ${JSON.stringify(pair)}` };
    }
    env[name] = pair.slice(at + 1);
  }
  return { ok: true, env };
}
