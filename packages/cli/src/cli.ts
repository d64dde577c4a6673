#!/usr/bin/env node
/**
 * toolgate — the command line for people. `toolgate --help` lists the commands, `toolgate <command> --help`
 * their options and the environment variables they read. Exit codes: 0 done, 1 the command failed, 2 the
 * command line or the environment is wrong (an unknown option, a missing argument or variable).
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { generateNatsIdentities, natsAuthorizationConfig, natsIdentitiesFromSeeds, parseNatsSeeds, type NatsIdentity } from "@toolgate/bus";
import { CallIdSchema, RunIdSchema, type ToolgateEvent } from "@toolgate/contracts";
import { CliError } from "./cli-error.js";
import { evalFaults, evalReplay, evalRun } from "./eval-commands.js";
import { parseCommandLine, usage, UsageError } from "./command-line.js";
import { callStatus, describeRun, startRunBody, type CallView, type PendingState, type RunView } from "./run-view.js";
import { describeEvent, tail } from "./tail.js";

const env = process.env;
let flags: Record<string, string | boolean | undefined> = {};

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

/**
 * Which of these pending calls (all of one run) wait for an approval: the orchestrator's results API tells
 * `running` from `awaiting_approval`, which its run and call views both show as `pending`.
 */
async function pendingStates(calls: readonly Pick<CallView, "call_id" | "status">[]): Promise<Map<string, PendingState>> {
  const states = new Map<string, PendingState>();
  const ids = calls.filter((c) => c.status === "pending").map((c) => c.call_id);
  // The API takes up to 64 calls a request.
  for (let i = 0; i < ids.length; i += 64) {
    const chunk = ids.slice(i, i + 64);
    const answer = await orchestrator<{ pending?: { call_id: string; status: string }[] }>(
      "GET",
      `/v1/providers/openai-chat/results?call_ids=${chunk.map(encodeURIComponent).join(",")}&wait_ms=0`,
      has("run_id", "complete"),
    );
    for (const p of answer.pending ?? []) states.set(p.call_id, p.status === "awaiting_approval" ? "awaiting_approval" : "running");
  }
  return states;
}

/** Prints a run, saying which of its pending calls wait for an approval. */
async function printRun(run: RunView): Promise<void> {
  const pending = flags.json ? new Map<string, PendingState>() : await pendingStates(run.calls);
  print(run, () => describeRun(run, pending));
}

/**
 * Long-polls a run until it has ended; on stderr, says once of each call that it waits for an approval (the
 * run waits with it, up to the approval's expiry).
 */
async function waitForRun(runId: string): Promise<RunView> {
  const announced = new Set<string>();
  for (;;) {
    // A short poll: a call that starts waiting for an approval is told within seconds.
    const run = await orchestrator<RunView>("GET", `/v1/runs/${encodeURIComponent(runId)}?wait_ms=2000`, has("run_id", "status", "calls"));
    if (run.status !== "running") return run;
    for (const [callId, state] of await pendingStates(run.calls)) {
      if (state !== "awaiting_approval" || announced.has(callId)) continue;
      announced.add(callId);
      const tool = run.calls.find((c) => c.call_id === callId)?.tool ?? "";
      console.error(`${runId}: ${callId} (${tool}) is waiting for an approval (toolgate approvals list)`);
    }
  }
}

/** `TOOLGATE_SUBJECT_PREFIX`, or a usage error naming it when it is not a subject prefix. */
function subjectPrefix(): string {
  const prefix = env.TOOLGATE_SUBJECT_PREFIX ?? "toolgate";
  if (!/^[a-z][a-z0-9_-]{0,31}$/.test(prefix)) throw new UsageError(`TOOLGATE_SUBJECT_PREFIX ${JSON.stringify(prefix).slice(0, 40)} is not a subject prefix`);
  return prefix;
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
      if (task !== undefined && !/^[A-Za-z0-9_-]{1,128}$/.test(task))
        throw new UsageError("runs start: --task must be a task id (up to 128 letters, digits, _ and -)");
      const input = typeof flags.input === "string" ? flags.input : "";
      const started = await orchestrator<{ run_id: string }>("POST", "/v1/runs", has("run_id"), startRunBody(flags.model, input, task));
      if (!flags.wait) return print(started, () => started.run_id);
      console.error(`started ${started.run_id}; waiting for it to end (Ctrl-C stops waiting, not the run)`);
      return printRun(await waitForRun(started.run_id));
    }
    case "runs get":
      return printRun(await orchestrator<RunView>("GET", `/v1/runs/${encodeURIComponent(id)}`, has("run_id", "status", "calls")));
    case "runs cancel":
      return printRun(await orchestrator<RunView>("POST", `/v1/runs/${encodeURIComponent(id)}/cancel`, has("run_id", "status", "calls"), {}));
    case "calls get": {
      const call = await orchestrator<{ call_id: string; tool: string; status: string; result?: unknown }>(
        "GET",
        `/v1/tool-calls/${encodeURIComponent(id)}`,
        has("call_id", "status"),
      );
      const pending = flags.json ? new Map<string, PendingState>() : await pendingStates([call]);
      return print(call, () => `${call.call_id}  ${call.tool}  ${callStatus(call, pending)}\n${JSON.stringify(call.result ?? null, null, 2)}`);
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
      if (typeof flags.call === "string" && !CallIdSchema.safeParse(flags.call).success) throw new UsageError("tail: --call must be a call id (call_<ULID>)");
      if (typeof flags.run === "string" && !RunIdSchema.safeParse(flags.run).success) throw new UsageError("tail: --run must be a run id (run_<ULID>)");
      return tail({
        servers: env.NATS_URL ?? "nats://127.0.0.1:4222",
        seed: env.NATS_NKEY_SEED,
        tlsCa: env.NATS_TLS_CA,
        prefix: subjectPrefix(),
        run: typeof flags.run === "string" ? flags.run : undefined,
        call: typeof flags.call === "string" ? flags.call : undefined,
        print: (event) => print(event, () => describeEvent(event)),
      });
    case "nats-auth":
      return natsAuth();
    case "eval faults":
      return console.log(evalFaults(id));
    case "eval replay":
      return evalReplay(flags, env, print);
    case "eval":
      return evalRun(id, flags, env, print);
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
  const refresh = flags.refresh === true;
  if (refresh && !existsSync(seeds)) throw new CliError(`${seeds} does not exist; run without --refresh to create identities`);
  if (!refresh) for (const file of [conf, seeds]) if (existsSync(file)) throw new CliError(`${file} exists; delete it to create new identities`);
  let identities: NatsIdentity[];
  try {
    identities = refresh ? natsIdentitiesFromSeeds(parseNatsSeeds(readFileSync(seeds, "utf8"))) : generateNatsIdentities();
  } catch (error) {
    throw new CliError(`${seeds}: ${(error as Error).message}`);
  }
  const include = typeof flags.include === "string" ? `include ${JSON.stringify(flags.include)}\n` : "";
  mkdirSync(flags.out, { recursive: true });
  writeFileSync(
    conf,
    `# Written by toolgate nats-auth.\n${include}${natsAuthorizationConfig(identities, { prefix, openToLocalTools: flags["local-tools"] === true })}`,
  );
  if (!refresh) writeFileSync(seeds, identities.map(({ role, seed }) => `TOOLGATE_NATS_SEED_${role.toUpperCase()}=${seed}\n`).join(""), { mode: 0o600 });
  console.error(refresh ? `wrote ${conf} (identities of ${seeds})` : `wrote ${conf} and ${seeds}`);
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
