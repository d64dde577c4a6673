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
