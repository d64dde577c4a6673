#!/usr/bin/env node
/**
 * toolgate — the command line for people. `toolgate --help` lists the commands, `toolgate <command> --help`
 * their options and the environment variables they read. Exit codes: 0 done, 1 the command failed, 2 the
 * command line or the environment is wrong (an unknown option, a missing argument or variable).
 */
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { connect } from "@nats-io/transport-node";
import { generateNatsIdentities, natsAuthorizationConfig, seedAuthenticator } from "@toolgate/bus";
import { parseEvent, subjectCatalogue, type ToolgateEvent } from "@toolgate/contracts";
import { parseCommandLine, usage, UsageError } from "./command-line.js";

const env = process.env;
let flags: Record<string, string | boolean | undefined> = {};

/** A failed command: printed as one line without a stack trace, exit code 1. */
class CliError extends Error {}

/** The value of an environment variable the command needs; a usage error (exit 2) naming it when unset. */
function variable(name: string, what: string): string {
  const value = env[name];
  if (!value) throw new UsageError(`${name} is not set (${what})`);
  return value;
}

/** What a service's answer must look like, to tell it from another service's (a wrong URL). */
type Expect = (body: Record<string, unknown>) => boolean;

async function http<T>(
  service: { urlVariable: string; name: string; token: string | undefined },
  method: "GET" | "POST",
  path: string,
  expect: Expect,
  body?: unknown,
): Promise<T> {
  const base = variable(service.urlVariable, `the URL of the ${service.name}`);
  const url = `${base.replace(/\/$/, "")}${path}`;
  let response: Response;
  try {
    response = await fetch(url, {
      method,
      headers: {
        ...(service.token ? { authorization: `Bearer ${service.token}` } : {}),
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  } catch (error) {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    throw new CliError(`cannot reach the ${service.name} at ${base} (${service.urlVariable}): ${cause?.code ?? cause?.message ?? (error as Error).message}`);
  }
  const text = await response.text();
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : {};
  } catch {
    parsed = undefined;
  }
  const answer = typeof parsed === "object" && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : undefined;
  const error = answer?.error as { code?: unknown; message?: unknown } | undefined;
  if (!response.ok && typeof error?.code === "string" && typeof error.message === "string") throw new CliError(`${error.code}: ${error.message}`);
  if (!answer || (response.ok && !expect(answer)) || !response.ok) {
    throw new CliError(
      `${base} did not answer as the Toolgate ${service.name} (${method} ${path}: HTTP ${response.status}${response.ok ? ", unexpected body" : ""}); check ${service.urlVariable}`,
    );
  }
  return answer as T;
}

const has =
  (...keys: string[]): Expect =>
  (body) =>
    keys.every((k) => k in body);

const orchestrator = <T>(method: "GET" | "POST", path: string, expect: Expect, body?: unknown) =>
  http<T>(
    { urlVariable: "TOOLGATE_URL", name: "orchestrator", token: variable("TOOLGATE_API_KEY", "the API key the orchestrator knows you by") },
    method,
    path,
    expect,
    body,
  );

function print(value: unknown, human: () => string): void {
  console.log(flags.json ? JSON.stringify(value, null, 2) : human());
}

interface RunView {
  run_id: string;
  status: string;
  model: string;
  final_text?: string;
  stop_reason?: string;
  calls: { call_id: string; provider_call_id: string; tool: string; status: string; result?: { ok: boolean; error?: { code: string } } }[];
}

function describeRun(run: RunView): string {
  const lines = [`${run.run_id}  ${run.status}${run.stop_reason ? ` (${run.stop_reason})` : ""}  model=${run.model}`];
  for (const c of run.calls)
    lines.push(`  ${c.call_id}  ${c.tool.padEnd(16)} ${c.status}${c.result ? (c.result.ok ? " ok" : ` ${c.result.error?.code ?? "error"}`) : ""}`);
  if (run.final_text) lines.push(`  final: ${run.final_text}`);
  return lines.join("\n");
}

/** One line per event, for `tail` and `audit`. */
export function describeEvent(event: ToolgateEvent): string {
  const who = event.kind === "call" ? event.call_id : event.run_id;
  const tool = event.tool?.name ?? (event.kind === "call" && event.type === "proposed" ? event.payload.tool_name : "");
  let detail = "";
  if (event.kind === "call" && (event.type === "completed" || event.type === "rejected" || event.type === "denied" || event.type === "outcome_unknown")) {
    const r = event.payload.result;
    detail = r.ok ? "ok" : `${r.error.code} retryable=${r.retryable}`;
  }
  if (event.kind === "run" && event.type === "stopped") detail = event.payload.reason;
  return `${event.time}  ${`${event.kind}.${event.type}`.padEnd(22)} ${who}  ${tool} ${detail}`.trimEnd();
}

async function tail(): Promise<void> {
  const subjects = subjectCatalogue(env.TOOLGATE_SUBJECT_PREFIX ?? "toolgate");
  const servers = env.NATS_URL ?? "nats://127.0.0.1:4222";
  const seed = env.NATS_NKEY_SEED;
  const nc = await connect({ servers: servers.split(","), timeout: 5_000, ...(seed ? { authenticator: seedAuthenticator(seed) } : {}) }).catch(
    (error: unknown) => {
      throw new CliError(`cannot reach NATS at ${servers} (NATS_URL): ${(error as Error).message}`);
    },
  );
  const call = typeof flags.call === "string" ? flags.call : undefined;
  const run = typeof flags.run === "string" ? flags.run : undefined;
  const filter = call ? subjects.oneCall(call) : `${subjects.prefix}.>`;
  const sub = nc.subscribe(filter);
  process.on("SIGINT", () => void nc.drain().then(() => process.exit(0)));
  process.on("SIGTERM", () => void nc.drain().then(() => process.exit(0)));
  console.error(`following ${filter}${run ? ` for run ${run}` : ""} (Ctrl-C to stop)`);
  for await (const msg of sub) {
    const parsed = parseEvent(msg.data, 8 * 1024 * 1024);
    if (!parsed.ok) {
      console.log(`(${msg.subject}: ${parsed.rejection.reason})`);
      continue;
    }
    if (run && parsed.event.run_id !== run) continue;
    print(parsed.event, () => describeEvent(parsed.event));
  }
}

interface Approval {
  approval_id: string;
  call_id: string;
  tool: { name: string; version: string };
  risk: string;
  requester: { subject: string };
  expires_at: string;
  plan_hash: string;
}

async function main(): Promise<void> {
  const line = parseCommandLine(process.argv.slice(2));
  if (line.kind === "help") {
    console.log(usage(line));
    return;
  }
  flags = line.options;
  const [id = ""] = line.args;
  const policy = <T>(method: "GET" | "POST", path: string, expect: Expect, body?: unknown) =>
    http<T>(
      { urlVariable: "TOOLGATE_POLICY_URL", name: "policy service", token: variable("TOOLGATE_APPROVER_TOKEN", "an approver's API key or token") },
      method,
      path,
      expect,
      body,
    );
  switch (line.command.name) {
    case "runs start": {
      const task = typeof flags.task === "string" ? flags.task : undefined;
      if (typeof flags.model !== "string") throw new UsageError("runs start: --model is required (see toolgate runs start --help)");
      const started = await orchestrator<{ run_id: string }>("POST", "/v1/runs", has("run_id"), {
        model: flags.model,
        input: typeof flags.input === "string" ? flags.input : "",
        context: task ? { task_id: task } : {},
      });
      if (!flags.wait) return print(started, () => started.run_id);
      let run: RunView;
      do run = await orchestrator<RunView>("GET", `/v1/runs/${encodeURIComponent(started.run_id)}?wait_ms=10000`, has("run_id", "status", "calls"));
      while (run.status === "running");
      return print(run, () => describeRun(run));
    }
    case "runs get": {
      const run = await orchestrator<RunView>("GET", `/v1/runs/${encodeURIComponent(id)}`, has("run_id", "status", "calls"));
      return print(run, () => describeRun(run));
    }
    case "runs cancel": {
      const run = await orchestrator<RunView>("POST", `/v1/runs/${encodeURIComponent(id)}/cancel`, has("run_id", "status", "calls"), {});
      return print(run, () => describeRun(run));
    }
    case "calls get": {
      const call = await orchestrator<{ call_id: string; tool: string; status: string; result?: unknown }>(
        "GET",
        `/v1/tool-calls/${encodeURIComponent(id)}`,
        has("call_id", "status"),
      );
      return print(call, () => `${call.call_id}  ${call.tool}  ${call.status}\n${JSON.stringify(call.result ?? null, null, 2)}`);
    }
    case "tools": {
      const format = typeof flags.format === "string" ? flags.format : undefined;
      const tools = await orchestrator<{ tools: { name: string; version: string; description: string }[] } & Record<string, unknown>>(
        "GET",
        `/v1/tools${format ? `?format=${encodeURIComponent(format)}` : ""}`,
        (body) => Array.isArray(body.tools),
      );
      return print(tools, () => (format ? JSON.stringify(tools, null, 2) : tools.tools.map((t) => `${t.name}@${t.version}  ${t.description}`).join("\n")));
    }
    case "approvals list": {
      const list = await policy<{ approvals: Approval[] }>("GET", "/v1/approvals", (body) => Array.isArray(body.approvals));
      return print(
        list,
        () =>
          list.approvals
            .map(
              (a) =>
                `${a.approval_id}  ${a.tool.name}@${a.tool.version}  ${a.risk} risk  call ${a.call_id}  requested by ${a.requester.subject}  expires ${a.expires_at}  plan ${a.plan_hash}`,
            )
            .join("\n") || "no pending approvals",
      );
    }
    case "approvals approve":
    case "approvals deny": {
      const action = line.command.name === "approvals approve" ? "approve" : "deny";
      const reason = typeof flags.reason === "string" ? { reason: flags.reason } : {};
      const decided = await policy<unknown>("POST", `/v1/approvals/${encodeURIComponent(id)}/${action}`, () => true, reason);
      return print(decided, () => `${action === "approve" ? "approved" : "denied"} ${id}`);
    }
    case "audit": {
      const kind = id.startsWith("run_") ? "runs" : "calls";
      const audit = <T>(path: string, expect: Expect) =>
        http<T>({ urlVariable: "TOOLGATE_AUDIT_URL", name: "audit service", token: env.TOOLGATE_AUDIT_TOKEN }, "GET", path, expect);
      if (flags.verify) {
        const verified = await audit<{ ok: boolean }>(`/v1/${kind}/${encodeURIComponent(id)}/verify`, (body) => typeof body.ok === "boolean");
        print(verified, () => (verified.ok ? "hash chain verified" : `hash chain BROKEN: ${JSON.stringify(verified)}`));
        if (!verified.ok) process.exitCode = 2;
        return;
      }
      const trail = await audit<{ events: { event: ToolgateEvent }[] }>(`/v1/${kind}/${encodeURIComponent(id)}/events`, (body) => Array.isArray(body.events));
      return print(trail, () => trail.events.map((e) => describeEvent(e.event)).join("\n"));
    }
    case "tail":
      return tail();
    case "nats-auth":
      return natsAuth();
  }
}

/**
 * Writes `nats-auth.conf` (the server's `authorization` block, including the configuration given) and
 * `nats-seeds.env` (`TOOLGATE_NATS_SEED_<ROLE>=SU…` for each role, readable by its owner only). The seeds are
 * secrets: hand each process only its own, as `NATS_NKEY_SEED`.
 */
function natsAuth(): void {
  if (typeof flags.out !== "string") throw new UsageError("--out is required");
  const prefix = typeof flags.prefix === "string" ? flags.prefix : "toolgate";
  if (prefix !== "*" && !/^[a-z][a-z0-9_-]{0,31}$/.test(prefix)) throw new UsageError(`--prefix ${prefix} is not a subject prefix`);
  const conf = join(flags.out, "nats-auth.conf");
  const seeds = join(flags.out, "nats-seeds.env");
  for (const file of [conf, seeds]) if (existsSync(file)) throw new CliError(`${file} exists; delete it to create new identities`);
  const identities = generateNatsIdentities();
  const include = typeof flags.include === "string" ? `include ${JSON.stringify(flags.include)}\n` : "";
  mkdirSync(flags.out, { recursive: true });
  writeFileSync(
    conf,
    `# Written by toolgate nats-auth.\n${include}${natsAuthorizationConfig(identities, { prefix, openToLocalTools: flags["local-tools"] === true })}`,
  );
  writeFileSync(seeds, identities.map(({ role, seed }) => `TOOLGATE_NATS_SEED_${role.toUpperCase()}=${seed}\n`).join(""), { mode: 0o600 });
  console.error(`wrote ${conf} and ${seeds}`);
}

main().catch((error: unknown) => {
  // One line, never a stack trace: usage errors exit 2, failed commands 1.
  if (error instanceof UsageError) {
    console.error(`toolgate: ${error.message}`);
    process.exit(2);
  }
  console.error(`toolgate: ${error instanceof CliError ? error.message : `unexpected failure: ${error instanceof Error ? error.message : String(error)}`}`);
  process.exit(1);
});
