import { parseArgs } from "node:util";

/** One option of a command: a flag (`boolean`) or an option that takes a value (`string`). */
interface OptionSpec {
  type: "boolean" | "string";
  /** What it does, for `--help`. */
  help: string;
  /** The value's name in the usage line. */
  value?: string;
}

/** One command: its words, its positional arguments, its options and the variables it reads. */
export interface CommandSpec {
  /** e.g. `runs start`. */
  name: string;
  args: readonly string[];
  summary: string;
  options: Readonly<Record<string, OptionSpec>>;
  env: readonly string[];
}

const JSON_OPTION: OptionSpec = { type: "boolean", help: "print the raw JSON answer" };
const ORCHESTRATOR_ENV = ["TOOLGATE_URL", "TOOLGATE_API_KEY"] as const;

/** Every command of the CLI, in the order `--help` lists them. */
export const COMMANDS: readonly CommandSpec[] = [
  {
    name: "runs start",
    args: [],
    summary: "start a managed run (and with --wait, wait for it to end)",
    options: {
      model: { type: "string", value: "model", help: "the model, e.g. scripted:c04 or openai:gpt-5 (required)" },
      input: { type: "string", value: "text", help: "the run's input" },
      task: { type: "string", value: "task_id", help: "the task the run works on: its context, and named in the input for the model" },
      wait: { type: "boolean", help: "wait until the run has ended and print it, saying which calls wait for an approval" },
      json: JSON_OPTION,
    },
    env: ORCHESTRATOR_ENV,
  },
  { name: "runs get", args: ["run_id"], summary: "show a run and its calls", options: { json: JSON_OPTION }, env: ORCHESTRATOR_ENV },
  { name: "runs cancel", args: ["run_id"], summary: "cancel a running run", options: { json: JSON_OPTION }, env: ORCHESTRATOR_ENV },
  { name: "calls get", args: ["call_id"], summary: "show a call and its result", options: { json: JSON_OPTION }, env: ORCHESTRATOR_ENV },
  {
    name: "tools",
    args: [],
    summary: "list the tools on offer",
    options: {
      format: { type: "string", value: "dialect", help: "openai-responses, openai-chat, anthropic, gemini or mcp: as that provider takes them" },
      json: JSON_OPTION,
    },
    env: ORCHESTRATOR_ENV,
  },
  {
    name: "approvals list",
    args: [],
    summary: "list the approvals waiting for a decision",
    options: { json: JSON_OPTION },
    env: ["TOOLGATE_POLICY_URL", "TOOLGATE_APPROVER_TOKEN"],
  },
  {
    name: "approvals approve",
    args: ["approval_id"],
    summary: "approve a call",
    options: { json: JSON_OPTION },
    env: ["TOOLGATE_POLICY_URL", "TOOLGATE_APPROVER_TOKEN"],
  },
  {
    name: "approvals deny",
    args: ["approval_id"],
    summary: "deny a call",
    options: { reason: { type: "string", value: "text", help: "why, for the requester" }, json: JSON_OPTION },
    env: ["TOOLGATE_POLICY_URL", "TOOLGATE_APPROVER_TOKEN"],
  },
  {
    name: "audit",
    args: ["run_id|call_id"],
    summary: "print the audit trail of a run or a call",
    options: { verify: { type: "boolean", help: "verify its hash chains instead (exit 2 when broken)" }, json: JSON_OPTION },
    env: ["TOOLGATE_AUDIT_URL", "TOOLGATE_AUDIT_TOKEN (when audit requires one)"],
  },
  {
    name: "eval faults",
    args: ["dataset"],
    summary: "print the executor's EXECUTOR_FAULTS value that serves a dataset's faulty and malicious tool results",
    options: {},
    env: [],
  },
  {
    name: "eval replay",
    args: [],
    summary: "replay recorded proposals against other contract versions with simulated downstreams; print what changed",
    options: {
      run: { type: "string", value: "run_id", help: "the proposals of this run, from audit" },
      file: { type: "string", value: "path", help: "the proposals from a file: { proposals: [...] } or a run's audit trail (toolgate audit <run> --json)" },
      contracts: { type: "string", value: "paths", help: "the new contract versions: JSON/YAML files or directories, comma-separated (required)" },
      json: JSON_OPTION,
    },
    env: ["TOOLGATE_AUDIT_URL (with --run)", "TOOLGATE_AUDIT_TOKEN (when audit requires one)"],
  },
  {
    name: "eval",
    args: ["dataset"],
    summary: "run every sample of an evaluation dataset as managed runs and print the metrics per class and overall",
    options: {
      model: { type: "string", value: "model", help: "the model, e.g. scripted:careful or openai:gpt-5 (required)" },
      repeat: { type: "string", value: "n", help: "how often to run each sample (default 1): mean and min–max over repeats" },
      concurrency: { type: "string", value: "n", help: "runs in flight at once (default 4)" },
      report: { type: "string", value: "path", help: "also write the JSON report (every run's scores) to this file" },
      "usd-per-1k-tokens": { type: "string", value: "price", help: "price of a thousand tokens, for cost per task" },
      json: { type: "boolean", help: "print the JSON report instead of the table" },
    },
    env: [
      ...ORCHESTRATOR_ENV,
      "TOOLGATE_AUDIT_URL",
      "TOOLGATE_AUDIT_TOKEN (when audit requires one)",
      "TOOLGATE_POLICY_URL and TOOLGATE_APPROVER_TOKEN (the simulated approver; without them, calls that need a human wait)",
      "TOOLGATE_EVAL_MONGO_URL (the executor's MongoDB)",
      "TOOLGATE_EVAL_TOOLS_DB (the executor's TOOLS_MONGO_DB, default toolgate_tools)",
    ],
  },
  {
    name: "tail",
    args: [],
    summary: "print events as they happen (Ctrl-C to stop); with --call, the call's history first",
    options: {
      run: { type: "string", value: "run_id", help: "only the events of this run, from now on" },
      call: { type: "string", value: "call_id", help: "only the events of this call, from its first one (also when it has ended)" },
      json: JSON_OPTION,
    },
    env: [
      "NATS_URL (default nats://127.0.0.1:4222)",
      "TOOLGATE_SUBJECT_PREFIX (default toolgate)",
      "NATS_NKEY_SEED (a subscriber's identity)",
      "NATS_TLS_CA (the servers' CA, for TLS)",
    ],
  },
  {
    name: "nats-auth",
    args: [],
    summary: "create an NATS identity per service, subscriber and operator, and the server configuration that holds each to its rights",
    options: {
      out: { type: "string", value: "dir", help: "where to write nats-auth.conf and nats-seeds.env (required; refused when they exist)" },
      refresh: { type: "boolean", help: "write nats-auth.conf again from the seeds already in dir (permissions of this release, same identities)" },
      include: { type: "string", value: "path", help: "a server configuration for nats-auth.conf to include, relative to dir" },
      prefix: { type: "string", value: "prefix", help: "the subject prefix the permissions name (default toolgate; * for every prefix)" },
      "local-tools": { type: "boolean", help: "development only: connections without credentials get every right" },
    },
    env: [],
  },
];

/** A command line that cannot be run: a one-line message for stderr, exit code 2. */
export class UsageError extends Error {
  override readonly name = "UsageError";
}

/** What to do: print help (for a command, or all of them), or run a command with its options and arguments. */
export type CommandLine =
  | { kind: "help"; command?: CommandSpec; group?: string }
  | { kind: "run"; command: CommandSpec; args: string[]; options: Record<string, string | boolean | undefined> };

/** Every option of every command (one name has one type everywhere), so that words and values part the same way. */
const ALL_OPTIONS: Record<string, { type: "boolean" | "string"; short?: string }> = { help: { type: "boolean", short: "h" } };
for (const command of COMMANDS) for (const [name, option] of Object.entries(command.options)) ALL_OPTIONS[name] = { type: option.type };

/**
 * Reads a command line: which command, its arguments and options, or a request for help. Throws
 * {@link UsageError} naming the unknown command, the unknown or misused option, or the missing argument.
 */
export function parseCommandLine(argv: readonly string[]): CommandLine {
  let parsed: ReturnType<typeof parseArgs<{ args: string[]; options: typeof ALL_OPTIONS; strict: false; tokens: true; allowPositionals: true }>>;
  try {
    parsed = parseArgs({ args: [...argv], options: ALL_OPTIONS, strict: false, tokens: true, allowPositionals: true });
  } catch (error) {
    throw new UsageError((error as Error).message.split("\n")[0] ?? "cannot read the command line");
  }
  const words = parsed.positionals;
  const help = parsed.tokens.some((t) => t.kind === "option" && t.name === "help");
  if (words.length === 0) {
    if (help || parsed.tokens.length === 0) return { kind: "help" };
    throw new UsageError("no command given (see toolgate --help)");
  }
  const command = findCommand(words);
  if (!command) {
    const group = COMMANDS.some((c) => c.name.startsWith(`${words[0]} `)) ? words[0] : undefined;
    if (help && group) return { kind: "help", group };
    if (group && words.length === 1 && group !== "approvals") throw new UsageError(`${group}: which one? (see toolgate ${group} --help)`);
    if (!group) throw new UsageError(`unknown command "${printable(words[0]!)}" (see toolgate --help)`);
    if (words.length > 1) throw new UsageError(`unknown command "${printable(`${words[0]} ${words[1]}`)}" (see toolgate ${group} --help)`);
  }
  // `toolgate approvals` alone lists them, as it always has.
  const resolved = command ?? COMMANDS.find((c) => c.name === "approvals list")!;
  if (help) return { kind: "help", command: resolved };
  const options: Record<string, string | boolean | undefined> = {};
  for (const token of parsed.tokens) {
    if (token.kind !== "option") continue;
    const spec = resolved.options[token.name];
    if (!spec) throw new UsageError(`${resolved.name}: unknown option ${printable(token.rawName)} (see toolgate ${resolved.name} --help)`);
    if (spec.type === "boolean" && token.value !== undefined) throw new UsageError(`${resolved.name}: ${token.rawName} takes no value`);
    if (spec.type === "string" && (token.value === undefined || token.value === "")) throw new UsageError(`${resolved.name}: ${token.rawName} needs a value`);
    options[token.name] = spec.type === "boolean" ? true : token.value;
  }
  const consumed = resolved.name.split(" ").length;
  const args = command ? words.slice(consumed) : [];
  if (args.length < resolved.args.length)
    throw new UsageError(`${resolved.name}: missing <${resolved.args[args.length]}> (see toolgate ${resolved.name} --help)`);
  if (args.length > resolved.args.length) throw new UsageError(`${resolved.name}: unexpected argument "${printable(args[resolved.args.length]!)}"`);
  return { kind: "run", command: resolved, args, options };
}

function findCommand(words: readonly string[]): CommandSpec | undefined {
  return COMMANDS.find((c) => {
    const parts = c.name.split(" ");
    return parts.every((p, i) => words[i] === p);
  });
}

/** Help text: every command's synopsis, a group's, or one command's options and variables. */
export function usage(line: { command?: CommandSpec; group?: string }): string {
  if (line.command) {
    const c = line.command;
    const lines = [`usage: ${synopsis(c)}`, "", `  ${c.summary}`, "", "options:"];
    for (const [name, o] of Object.entries(c.options)) lines.push(`  ${`--${name}${o.value ? ` <${o.value}>` : ""}`.padEnd(22)} ${o.help}`);
    lines.push(`  ${"-h, --help".padEnd(22)} show this help`, "", "environment:", ...c.env.map((e) => `  ${e}`));
    return lines.join("\n");
  }
  const listed = COMMANDS.filter((c) => line.group === undefined || c.name.startsWith(`${line.group} `));
  return [
    "usage: toolgate <command> [options]   (toolgate <command> --help for its options)",
    "",
    ...listed.map((c) => `  ${synopsis(c).padEnd(52)} ${c.summary}`),
  ].join("\n");
}

function synopsis(c: CommandSpec): string {
  const required = Object.entries(c.options)
    .filter(([, o]) => o.help.endsWith("(required)"))
    .map(([name, o]) => `--${name} <${o.value}>`);
  return ["toolgate", c.name, ...c.args.map((a) => `<${a}>`), ...required, ...(Object.keys(c.options).length > required.length ? ["[options]"] : [])].join(" ");
}

/** A string from the command line, safe to print in one line. */
function printable(text: string): string {
  return JSON.stringify(text).slice(1, -1).slice(0, 64);
}
