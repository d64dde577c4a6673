#!/usr/bin/env node
/**
 * toolgate — the command line for people.
 *
 *   toolgate runs start --model scripted:c04 --input "…" [--task <id>] [--wait]
 *   toolgate runs get <run_id> | cancel <run_id>
 *   toolgate calls get <call_id>
 *   toolgate tools [--format openai-responses|openai-chat|anthropic|gemini|mcp]
 *   toolgate approvals list | approve <approval_id> | deny <approval_id> [--reason …]
 *   toolgate audit <run_id|call_id> [--verify]
 *   toolgate tail [--run <run_id>] [--call <call_id>]
 *   toolgate keys [orchestrator|policy|executor]
 *
 * `keys` prints fresh Ed25519 signing keys as environment lines: for every role (a new deployment) or for one
 * (rotation: add its public key to TOOLGATE_TRUSTED_KEYS everywhere, then give the service the private key).
 *
 * Environment: TOOLGATE_URL (orchestrator), TOOLGATE_API_KEY, TOOLGATE_AUDIT_URL, TOOLGATE_AUDIT_TOKEN,
 * TOOLGATE_POLICY_URL, TOOLGATE_APPROVER_TOKEN, NATS_URL, TOOLGATE_SUBJECT_PREFIX. Add --json for raw output.
 */
import { parseArgs } from "node:util";
import { connect } from "@nats-io/transport-node";
import { generateKeyPairSync } from "node:crypto";
import { exportKeyPair, parseEvent, SIGNER_ROLES, subjectCatalogue, type SignerRole, type ToolgateEvent } from "@toolgate/contracts";

const env = process.env;
const { values: flags, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    model: { type: "string" },
    input: { type: "string" },
    task: { type: "string" },
    wait: { type: "boolean", default: false },
    format: { type: "string" },
    run: { type: "string" },
    call: { type: "string" },
    reason: { type: "string" },
    verify: { type: "boolean", default: false },
    json: { type: "boolean", default: false },
    help: { type: "boolean", short: "h", default: false },
  },
});

/** A failed command: printed without a stack trace, exit code 1. */
class CliError extends Error {}

function required(name: string, value: string | undefined): string {
  if (!value) throw new CliError(`${name} is required`);
  return value;
}

async function http<T>(base: string | undefined, method: "GET" | "POST", path: string, token: string | undefined, body?: unknown): Promise<T> {
  const url = `${required("the service URL (TOOLGATE_URL, TOOLGATE_AUDIT_URL or TOOLGATE_POLICY_URL)", base).replace(/\/$/, "")}${path}`;
  let response: Response;
  try {
    response = await fetch(url, {
      method,
      headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body === undefined ? {} : { "content-type": "application/json" }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  } catch (error) {
    throw new CliError(`cannot reach ${url}: ${(error as Error).message}`);
  }
  const text = await response.text();
  const parsed = text ? (JSON.parse(text) as T & { error?: { code: string; message: string } }) : ({} as T & { error?: undefined });
  if (!response.ok && parsed.error) throw new CliError(`${parsed.error.code}: ${parsed.error.message}`);
  if (!response.ok) throw new CliError(`${method} ${path} answered ${response.status}`);
  return parsed;
}

const orchestrator = <T>(method: "GET" | "POST", path: string, body?: unknown) => http<T>(env.TOOLGATE_URL, method, path, env.TOOLGATE_API_KEY, body);

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
  const nc = await connect({ servers: (env.NATS_URL ?? "nats://127.0.0.1:4222").split(",") });
  const filter = flags.call ? subjects.oneCall(flags.call) : `${subjects.prefix}.>`;
  const sub = nc.subscribe(filter);
  process.on("SIGINT", () => void nc.drain().then(() => process.exit(0)));
  process.on("SIGTERM", () => void nc.drain().then(() => process.exit(0)));
  console.error(`following ${filter}${flags.run ? ` for run ${flags.run}` : ""} (Ctrl-C to stop)`);
  for await (const msg of sub) {
    const parsed = parseEvent(msg.data, 8 * 1024 * 1024);
    if (!parsed.ok) {
      console.log(`(${msg.subject}: ${parsed.rejection.reason})`);
      continue;
    }
    if (flags.run && parsed.event.run_id !== flags.run) continue;
    print(parsed.event, () => describeEvent(parsed.event));
  }
}

/** Fresh signing keys as environment lines; the private keys go to stdout only, never to a log. */
function keys(role: string | undefined): void {
  if (role !== undefined && !(SIGNER_ROLES as readonly string[]).includes(role)) throw new CliError(`role must be one of ${SIGNER_ROLES.join(", ")}`);
  const roles = role === undefined ? [...SIGNER_ROLES] : [role as SignerRole];
  const pairs = roles.map((r) => ({ role: r, ...exportKeyPair(generateKeyPairSync("ed25519").privateKey) }));
  if (flags.json) {
    console.log(JSON.stringify(pairs.map((p) => ({ role: p.role, key_id: p.keyId, private_key: p.privateKey, public_key: p.publicKey }))));
    return;
  }
  for (const p of pairs) console.log(`${p.role.toUpperCase()}_SIGNING_KEY=${p.privateKey}`);
  const trusted = Object.fromEntries(pairs.map((p) => [p.role, [p.publicKey]]));
  console.log(`TOOLGATE_TRUSTED_KEYS=${JSON.stringify(trusted)}`);
  for (const p of pairs) console.error(`${p.role}: key id ${p.keyId}`);
}

async function main(): Promise<void> {
  const [group, action, id] = positionals;
  if (flags.help || !group) {
    console.log("usage: toolgate runs|calls|tools|approvals|audit|tail|keys … (see the header of packages/cli/src/cli.ts)");
    return;
  }
  switch (group) {
    case "runs":
      if (action === "start") {
        const started = await orchestrator<{ run_id: string }>("POST", "/v1/runs", {
          model: required("--model", flags.model),
          input: flags.input ?? "",
          context: flags.task ? { task_id: flags.task } : {},
        });
        if (!flags.wait) return print(started, () => started.run_id);
        let run: RunView;
        do run = await orchestrator<RunView>("GET", `/v1/runs/${started.run_id}?wait_ms=10000`);
        while (run.status === "running");
        return print(run, () => describeRun(run));
      }
      if (action === "get") {
        const run = await orchestrator<RunView>("GET", `/v1/runs/${required("run id", id)}`);
        return print(run, () => describeRun(run));
      }
      if (action === "cancel") {
        const run = await orchestrator<RunView>("POST", `/v1/runs/${required("run id", id)}/cancel`, {});
        return print(run, () => describeRun(run));
      }
      break;
    case "calls":
      if (action === "get") {
        const call = await orchestrator<{ call_id: string; tool: string; status: string; result?: unknown }>(
          "GET",
          `/v1/tool-calls/${required("call id", id)}`,
        );
        return print(call, () => `${call.call_id}  ${call.tool}  ${call.status}\n${JSON.stringify(call.result ?? null, null, 2)}`);
      }
      break;
    case "tools": {
      const tools = await orchestrator<{ tools: { name: string; version: string; description: string }[] } & Record<string, unknown>>(
        "GET",
        `/v1/tools${flags.format ? `?format=${encodeURIComponent(flags.format)}` : ""}`,
      );
      return print(tools, () =>
        flags.format ? JSON.stringify(tools, null, 2) : tools.tools.map((t) => `${t.name}@${t.version}  ${t.description}`).join("\n"),
      );
    }
    case "approvals": {
      const policy = <T>(method: "GET" | "POST", path: string, body?: unknown) =>
        http<T>(env.TOOLGATE_POLICY_URL, method, path, env.TOOLGATE_APPROVER_TOKEN, body);
      if (action === "list" || action === undefined) {
        const list = await policy<{
          approvals: {
            approval_id: string;
            call_id: string;
            tool: { name: string; version: string };
            risk: string;
            requester: { subject: string };
            expires_at: string;
            plan_hash: string;
          }[];
        }>("GET", "/v1/approvals");
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
      if (action === "approve" || action === "deny") {
        const decided = await policy<unknown>("POST", `/v1/approvals/${required("approval id", id)}/${action}`, flags.reason ? { reason: flags.reason } : {});
        return print(decided, () => `${action === "approve" ? "approved" : "denied"} ${id}`);
      }
      break;
    }
    case "audit": {
      const target = required("run or call id", action);
      const kind = target.startsWith("run_") ? "runs" : "calls";
      const audit = <T>(path: string) => http<T>(env.TOOLGATE_AUDIT_URL, "GET", path, env.TOOLGATE_AUDIT_TOKEN);
      if (flags.verify) {
        const verified = await audit<{ ok: boolean }>(`/v1/${kind}/${target}/verify`);
        print(verified, () => (verified.ok ? "hash chain and signatures verified" : `verification FAILED: ${JSON.stringify(verified)}`));
        if (!verified.ok) process.exitCode = 2;
        return;
      }
      const trail = await audit<{ events: { event: ToolgateEvent }[] }>(`/v1/${kind}/${target}/events`);
      return print(trail, () => trail.events.map((e) => describeEvent(e.event)).join("\n"));
    }
    case "tail":
      return tail();
    case "keys":
      return keys(action);
  }
  throw new CliError(`unknown command: ${positionals.join(" ")}`);
}

main().catch((error: unknown) => {
  console.error(error instanceof CliError ? `toolgate: ${error.message}` : error);
  process.exit(1);
});
