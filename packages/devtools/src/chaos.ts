/**
 * The chaos suite: a steady load of side-effecting calls through the public API while one fault at a time hits
 * the stack — the NATS server killed, FerretDB paused and killed, audit, policy, the orchestrator and executors
 * killed, every service restarted in turn — and, per scenario, what became of every call: submitted, terminal,
 * lost, duplicate effects (counted in the tool's own ledger, per logical call), audit gaps (an effect without a
 * `started` by the executor that applied it, or a retry or takeover claimed without its attempt in the audit
 * trail), 5xx answers other than 503, and the
 * recovery time (from the end of the fault until every call submitted before then has its outcome).
 *
 * With `--cluster` the stack runs on a three-node NATS cluster (`PrivateNatsCluster`, streams with three
 * replicas) and the faults hit its nodes: one node killed -9 and brought back, the node that leads the events
 * stream killed, all three restarted one after another, and the events stream's leader paused (SIGSTOP) for
 * longer than the clients' publish and ack timeouts.
 *
 * The client is the one a careful host would write: each logical call carries its own `Idempotency-Key`, and
 * a submission whose answer did not arrive (a reset connection, a timeout, 503, 409 while the first is in
 * flight) is sent again, unchanged, until it answers; a call still running is waited for with long polls
 * (`GET /v1/tool-calls/:id?wait_ms=`). The servers are private (`PrivateNats`,
 * `PrivateFerretDb`): the suite kills its own, never the shared ones.
 *
 *   node packages/devtools/dist/chaos.js [--cluster] [--scenarios all|<name>,…] [--short] [--rate 30] [--timeline] [--json <file>]
 *
 * `--short` shortens every fault and the load around it. Exits 1 when any scenario loses a call, duplicates
 * an effect, leaves an audit gap, answers 5xx other than 503, or (unless `--gate invariants`) recovers in more
 * than 5 s. CI runs `--short --gate invariants` on the scenarios that hold them (see .ci/run): recovery times
 * on a shared two-core runner are printed, not gated.
 */
import { writeFileSync } from "node:fs";
import { PrivateFerretDb, PrivateNats, PrivateNatsCluster, Stack, type AuditedEvent } from "@toolgate/testkit";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { MongoClient, type Db } from "mongodb";
import { commandLineOrExit } from "./command-line.js";
import { stopOnInterrupt } from "./interrupts.js";

const USAGE = `usage: node packages/devtools/dist/chaos.js [--cluster] [--scenarios all|<name>,…] [--short] [--rate 30]
       [--gate all|invariants] [--timeline] [--json <file>]
Runs faults under a steady load and reports, per scenario: submitted, terminal, lost, duplicate effects, audit
gaps, 5xx, 503 and recovery time (see the README, "Chaos").`;

const OPTIONS = {
  scenarios: { type: "string", default: "all" },
  short: { type: "boolean", default: false },
  rate: { type: "string", default: "30" },
  json: { type: "string" },
  /** `all`: a scenario passes only within the recovery limit too; `invariants`: lost, duplicates, gaps and 5xx only. */
  gate: { type: "string", default: "all" },
  /** Run the cluster scenarios, on a three-node NATS cluster with R3 streams, instead of the single-server ones. */
  cluster: { type: "boolean", default: false },
  /** Print the answers the clients got around the fault's end, per 500 ms. */
  timeline: { type: "boolean", default: false },
} as const;

const args = commandLineOrExit("chaos", USAGE, OPTIONS);

const SHORT = args.short;
const RATE = Number(args.rate);
/** Load before the fault starts, and after it ends. */
const LEAD_MS = SHORT ? 2_000 : 4_000;
const TAIL_MS = SHORT ? 3_000 : 6_000;
const DRAIN_MS = 90_000;
const RECOVERY_LIMIT_MS = 5_000;
const TERMINAL = new Set(["completed", "outcome_unknown", "rejected", "denied"]);

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** What a fault can hit: the stack, its NATS (one server or a cluster) and its FerretDB. */
interface FaultContext<N> {
  stack: Stack;
  nats: N;
  ferret: PrivateFerretDb;
}

interface Scenario<N> {
  name: string;
  /** Injects the fault; resolves when it is over (the process restarted, the server resumed). */
  fault(ctx: FaultContext<N>): Promise<void>;
}

const SCENARIOS: Scenario<PrivateNats>[] = [
  {
    name: "nats-kill",
    async fault({ nats }) {
      await nats.kill();
      await sleep(SHORT ? 3_000 : 5_000);
      await nats.start();
    },
  },
  {
    name: "ferretdb-pause",
    async fault({ ferret }) {
      ferret.pause();
      await sleep(SHORT ? 4_000 : 10_000);
      ferret.resume();
    },
  },
  {
    name: "ferretdb-kill",
    async fault({ ferret }) {
      await ferret.kill();
      await sleep(2_000);
      await ferret.start();
    },
  },
  {
    name: "audit-kill",
    async fault({ stack }) {
      await stack.process("audit").kill();
      await sleep(SHORT ? 5_000 : 20_000);
      await stack.startService("audit");
    },
  },
  {
    name: "policy-kill",
    async fault({ stack }) {
      await stack.process("policy").kill();
      await stack.startService("policy");
    },
  },
  {
    name: "orchestrator-kill",
    async fault({ stack }) {
      await stack.process("orchestrator").kill();
      await stack.startService("orchestrator");
    },
  },
  {
    name: "executor-kills",
    async fault({ stack }) {
      const until = Date.now() + (SHORT ? 9_000 : 30_000);
      for (let k = 0; Date.now() < until; k++) {
        const label = `executor-${(k % 2) + 1}`;
        await stack.process(label).kill();
        await stack.startService("executor", label);
        await sleep(3_000);
      }
    },
  },
  {
    name: "rolling-restart",
    async fault({ stack }) {
      for (const [service, label] of [
        ["audit", "audit"],
        ["policy", "policy"],
        ["executor", "executor-1"],
        ["executor", "executor-2"],
        ["orchestrator", "orchestrator"],
      ] as const) {
        await stack.process(label).stop();
        await stack.startService(service, label);
      }
    },
  },
];

/** How long a node stays down or paused: past the clients' 5 s publish timeout and 3 s ack wait. */
const NODE_DOWN_MS = SHORT ? 8_000 : 20_000;

const CLUSTER_SCENARIOS: Scenario<PrivateNatsCluster>[] = [
  {
    // A node that does not lead the events stream: its clients fail over, the stream keeps its quorum.
    name: "nats-node-kill",
    async fault({ stack, nats }) {
      const leader = await nats.streamLeader(stack.eventStream);
      const node = nats.nodes.find((n) => n !== leader)!;
      console.log(`  kill -9 ${node.serverName} (the events stream's leader is ${leader.serverName})`);
      await node.kill();
      await sleep(NODE_DOWN_MS);
      await nats.restart(node);
    },
  },
  {
    name: "nats-leader-kill",
    async fault({ stack, nats }) {
      const leader = await nats.streamLeader(stack.eventStream);
      const killedAt = Date.now();
      await leader.kill();
      const next = await nats.streamLeader(stack.eventStream, 30_000);
      console.log(`  kill -9 ${leader.serverName}, the events stream's leader: ${next.serverName} leads after ${Date.now() - killedAt} ms`);
      await sleep(Math.max(0, killedAt + NODE_DOWN_MS - Date.now()));
      await nats.restart(leader);
    },
  },
  {
    // Each node stopped (SIGTERM) and started again once the one before has caught up, as an upgrade would.
    name: "nats-rolling",
    async fault({ nats }) {
      for (const node of nats.nodes) {
        await node.kill("SIGTERM");
        await nats.restart(node);
      }
    },
  },
  {
    // The stream's leader stops answering without closing a connection: clients on it see only timeouts.
    name: "nats-node-pause",
    async fault({ stack, nats }) {
      const leader = await nats.streamLeader(stack.eventStream);
      console.log(`  SIGSTOP ${leader.serverName}, the events stream's leader, for ${NODE_DOWN_MS / 1_000} s`);
      leader.pause();
      await sleep(NODE_DOWN_MS);
      leader.resume();
      await leader.healthy(60_000);
    },
  },
];

/** What happened to one logical call, as the client saw it. */
interface CallRecord {
  n: number;
  submittedAt: number;
  endedAt?: number;
  status?: string;
  /** Runtime call ids the orchestrator answered with, over all of the client's attempts. */
  callIds: Set<string>;
  attempts: number;
  /** The last answer the client got: status and error code, for the report on calls that never ended. */
  last?: string;
  /** The client's latest requests (when each was answered, epoch ms, and how): what the slowest call waited on. */
  history: { at: number; answer: string }[];
}

/** Requests remembered per call for the report on the slowest one. */
const HISTORY = 16;

/** A host that submits calls at a fixed rate and retries each, unchanged, until it has an outcome. */
class Load {
  readonly calls: CallRecord[] = [];
  /** HTTP answers by status (0: no answer at all). */
  readonly answers = new Map<number, number>();
  readonly #stack: Stack;
  readonly #scenario: string;
  readonly #pending: Promise<void>[] = [];
  #stopped = false;
  #submitting: Promise<void> | undefined;
  /** Calls give up at this time (set when the drain ends). */
  #deadline = Number.POSITIVE_INFINITY;

  constructor(stack: Stack, scenario: string) {
    this.#stack = stack;
    this.#scenario = scenario;
  }

  start(): void {
    this.#submitting = (async () => {
      const begin = Date.now();
      for (let n = 0; !this.#stopped; n++) {
        const due = begin + (n * 1_000) / RATE;
        if (due > Date.now()) await sleep(due - Date.now());
        if (this.#stopped) break;
        const record: CallRecord = { n, submittedAt: Date.now(), callIds: new Set(), attempts: 0, history: [] };
        this.calls.push(record);
        this.#pending.push(this.#drive(record));
      }
    })();
  }

  /** Stops submitting; resolves when every call has an outcome or `deadlineMs` has passed. */
  async finish(deadlineMs: number): Promise<void> {
    this.#stopped = true;
    await this.#submitting;
    await Promise.race([Promise.all(this.#pending), sleep(deadlineMs)]);
    this.#deadline = 0;
  }

  async #drive(record: CallRecord): Promise<void> {
    const body = {
      calls: [{ id: "host_1", name: "chaos_write", arguments: { n: record.n, delay_ms: 20 + (record.n % 5) * 20, effect: "after_delay" } }],
      wait_ms: 5_000,
    };
    const key = `chaos-${this.#scenario}-${record.n}`;
    while (Date.now() < this.#deadline) {
      record.attempts++;
      const answer = await this.#request("POST", "/v1/tool-calls", body, key, record);
      if (answer.status === 200 || answer.status === 202) {
        const result = (answer.body as { results?: { call_id: string; status: string }[] }).results?.[0];
        if (result) {
          record.callIds.add(result.call_id);
          // A host submission answers "done" for a call that ended (GET /v1/tool-calls/:id names how it ended).
          if (result.status === "done" || TERMINAL.has(result.status)) {
            record.status = result.status;
            record.endedAt = Date.now();
            return;
          }
          if (await this.#poll(record, result.call_id)) return;
          continue;
        }
      }
      await sleep(retryDelay(answer.retryAfter));
    }
  }

  /** Waits for the call's outcome through `GET /v1/tool-calls/:id`; false when the stack stopped answering. */
  async #poll(record: CallRecord, callId: string): Promise<boolean> {
    while (Date.now() < this.#deadline) {
      // A long poll: the answer comes when the call ends (or after 5 s), not once per polling interval.
      const answer = await this.#request("GET", `/v1/tool-calls/${callId}?wait_ms=5000`, undefined, undefined, record);
      const status = (answer.body as { status?: string } | undefined)?.status;
      if (answer.status === 200 && status !== undefined && TERMINAL.has(status)) {
        record.status = status;
        record.endedAt = Date.now();
        return true;
      }
      if (answer.status === 404) return false;
      if (answer.status !== 200) await sleep(retryDelay(answer.retryAfter));
    }
    return false;
  }

  async #request(
    method: "GET" | "POST",
    path: string,
    body?: unknown,
    key?: string,
    record?: CallRecord,
  ): Promise<{ status: number; body: unknown; retryAfter?: string }> {
    let status = 0;
    try {
      const response = await fetch(`${this.#stack.orchestratorUrl}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${this.#stack.apiKeys.alice}`,
          ...(key ? { "idempotency-key": key } : {}),
          ...(body === undefined ? {} : { "content-type": "application/json" }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(15_000),
      });
      status = response.status;
      const text = await response.text();
      if (record) {
        record.last = `${method} ${status} ${text.slice(0, 160)}`;
        remember(record, `${method} ${status}${status >= 300 ? ` ${errorCodeOf(text)}` : ""}`);
      }
      const retryAfter = response.headers.get("retry-after") ?? undefined;
      return { status, body: text ? (JSON.parse(text) as unknown) : undefined, ...(retryAfter ? { retryAfter } : {}) };
    } catch (error) {
      if (record) {
        record.last = `${method} ${status} ${(error as Error).message}`;
        remember(record, `${method} ${(error as Error).name}`);
      }
      return { status, body: undefined };
    } finally {
      this.answers.set(status, (this.answers.get(status) ?? 0) + 1);
    }
  }
}

function remember(record: CallRecord, answer: string): void {
  record.history.push({ at: Date.now(), answer });
  if (record.history.length > HISTORY) record.history.shift();
}

/** An error answer's code, and for a 503 the dependency it names (`UNAVAILABLE nats`, `UNAVAILABLE capacity`). */
function errorCodeOf(text: string): string {
  try {
    const error = (JSON.parse(text) as { error?: { code?: string; details?: { dependency?: unknown } } }).error;
    const dependency = error?.details?.dependency;
    return [error?.code ?? "", typeof dependency === "string" ? dependency : ""].filter(Boolean).join(" ");
  } catch {
    return "";
  }
}

const indent = (text: string): string =>
  text
    .trimEnd()
    .split("\n")
    .map((line) => `    ${line}`)
    .join("\n");

function retryDelay(retryAfter: string | undefined): number {
  const seconds = Number(retryAfter);
  return Number.isFinite(seconds) && seconds > 0 ? Math.min(seconds * 1_000, 2_000) : 250;
}

interface ScenarioReport {
  scenario: string;
  submitted: number;
  terminal: number;
  lost: number;
  duplicateEffects: number;
  /** Logical calls that got more than one runtime call id (a retry that was not recognized). */
  duplicateCalls: number;
  auditGaps: number;
  fiveXX: number;
  unavailable503: number;
  recoveryMs: number;
  passed: boolean;
}

async function runScenario<N extends PrivateNats | PrivateNatsCluster>(
  scenario: Scenario<N>,
  nats: N,
  ferret: PrivateFerretDb,
  mongo: MongoClient,
): Promise<ScenarioReport> {
  const clustered = nats instanceof PrivateNatsCluster;
  const natsUrl = clustered ? nats.urls : nats.url;
  const stack = await Stack.start({
    natsUrl,
    // The sync guard checks the cluster's nodes; the single server flushes on the default interval on purpose.
    ...(clustered ? { natsMonitorUrl: nats.monitorUrls } : {}),
    mongoUrl: ferret.url,
    toolsets: ["chaos", "operations"],
    executors: 2,
    logLevel: "warn",
    streamReplicas: clustered ? 3 : 1,
    // Each service with its own NATS identity, held to its subject permissions through every fault.
    natsSeeds: nats.seeds,
  });
  const forget = stopOnInterrupt(stack);
  try {
    const load = new Load(stack, scenario.name);
    load.start();
    await sleep(LEAD_MS);
    await scenario.fault({ stack, nats, ferret });
    const faultEnd = Date.now();
    await sleep(TAIL_MS);
    await load.finish(DRAIN_MS);
    await stack.quiesce(60_000).catch((error: unknown) => console.log(`  not quiescent: ${(error as Error).message}`));

    const tools = mongo.db(`${stack.name}_tools`);
    const runtime = mongo.db(`${stack.name}_runtime`);
    const ended = load.calls.filter((c) => c.endedAt !== undefined);
    const before = load.calls.filter((c) => c.submittedAt <= faultEnd);
    const recoveryMs = Math.max(0, ...before.map((c) => (c.endedAt ?? Number.POSITIVE_INFINITY) - faultEnd));
    const fiveXX = [...load.answers].filter(([status]) => status >= 500 && status !== 503).reduce((s, [, n]) => s + n, 0);
    const report: ScenarioReport = {
      scenario: scenario.name,
      submitted: load.calls.length,
      terminal: ended.length,
      lost: load.calls.length - ended.length,
      duplicateEffects: await duplicateEffectsPerCall(tools),
      duplicateCalls: load.calls.filter((c) => c.callIds.size > 1).length,
      auditGaps: await auditGaps(stack, runtime, tools, natsUrl),
      fiveXX,
      unavailable503: load.answers.get(503) ?? 0,
      recoveryMs,
      passed: false,
    };
    const unended = load.calls.filter((c) => c.endedAt === undefined).slice(0, 5);
    const held = await streamHolds(stack, natsUrl, [...new Set(unended.flatMap((c) => [...c.callIds]))]);
    // What the orchestrator's store says of the call: its record and its attached outcome (the API reads both).
    const stored = async (id: string) => {
      const [record, result] = await Promise.all([
        runtime.collection<{ _id: string }>("calls").findOne({ _id: id }, { projection: { _id: 1 } }),
        runtime.collection<{ _id: string; terminal?: string }>("call_results").findOne({ _id: id }, { projection: { terminal: 1 } }),
      ]);
      return `record ${record ? "yes" : "no"}, result ${result?.terminal ?? "none"}`;
    };
    for (const call of unended) {
      const ids = await Promise.all([...call.callIds].map(async (id) => `${id} (stream holds: ${held.get(id)}; store: ${await stored(id)})`));
      console.log(`  never ended: n=${call.n} attempts=${call.attempts} call ids=${ids.join(",") || "none"} last: ${call.last ?? "no answer"}`);
    }
    // When the calls submitted before the fault's end ended: a few stragglers, or the whole backlog late.
    const endings = before.flatMap((c) => (c.endedAt === undefined ? [] : [c.endedAt - faultEnd])).sort((a, b) => a - b);
    const at = (q: number) => endings[Math.min(endings.length - 1, Math.floor(q * endings.length))] ?? 0;
    if (endings.length > 0) {
      console.log(`  calls submitted before the fault's end ended (ms after it): p50 ${at(0.5)}, p90 ${at(0.9)}, p99 ${at(0.99)}, max ${at(1)}`);
    }
    // When those were first answered 200 or 202 after it (a submission waits up to 5 s for its outcome).
    const accepted = before
      .flatMap((c) => {
        const first = c.history.find((h) => h.at >= faultEnd && /^POST 20[02]/.test(h.answer));
        return first ? [first.at - faultEnd] : [];
      })
      .sort((a, b) => a - b);
    const acceptedAt = (q: number) => accepted[Math.min(accepted.length - 1, Math.floor(q * accepted.length))] ?? 0;
    if (accepted.length > 0) {
      console.log(
        `  of those, ${accepted.length} first answered 200/202 after the fault's end (ms): p50 ${acceptedAt(0.5)}, p90 ${acceptedAt(0.9)}, max ${acceptedAt(1)}`,
      );
    }
    // With --timeline: every answer the clients got, and what the services logged, per 500 ms from 1 s before the
    // fault's end to 10 s after.
    if (args.timeline) {
      const buckets = new Map<number, Map<string, number>>();
      for (const h of load.calls.flatMap((c) => c.history)) {
        const bucket = Math.floor((h.at - faultEnd) / 500);
        if (bucket < -2 || bucket >= 20) continue;
        const answers = buckets.get(bucket) ?? new Map<string, number>();
        answers.set(h.answer, (answers.get(h.answer) ?? 0) + 1);
        buckets.set(bucket, answers);
      }
      // And what the services logged meanwhile (warnings and errors: the stack runs at level warn).
      const said = new Map<number, Map<string, number>>();
      for (const proc of stack.processes) {
        for (const line of proc.logs()) {
          if (typeof line.time !== "string") continue;
          const bucket = Math.floor((Date.parse(line.time) - faultEnd) / 500);
          if (bucket < -2 || bucket >= 20) continue;
          const what = `${proc.name}: ${String(line.msg)}${typeof line.reason === "string" ? ` (${line.reason.slice(0, 60)})` : ""}`;
          const lines = said.get(bucket) ?? new Map<string, number>();
          lines.set(what, (lines.get(what) ?? 0) + 1);
          said.set(bucket, lines);
        }
      }
      for (const bucket of [...new Set([...buckets.keys(), ...said.keys()])].sort((a, b) => a - b)) {
        const answers = [...(buckets.get(bucket) ?? [])].sort((a, b) => b[1] - a[1]).map(([answer, n]) => `${answer} ×${n}`);
        console.log(`  ${String(bucket * 500).padStart(6)} ms: ${answers.join(", ")}`);
        for (const [what, n] of [...(said.get(bucket) ?? [])].sort((a, b) => b[1] - a[1])) console.log(`             ${what} ×${n}`);
      }
    }
    // The call that set the recovery time, and what it went through after the fault (ms from the fault's end).
    const slowest = before.filter((c) => c.endedAt !== undefined).sort((a, b) => b.endedAt! - a.endedAt!)[0];
    if (slowest) {
      const steps = slowest.history.filter((h) => h.at >= faultEnd - 1_000).map((h) => `${h.at - faultEnd} ${h.answer}`);
      console.log(
        `  slowest: n=${slowest.n} submitted ${slowest.submittedAt - faultEnd} ms, ended ${slowest.endedAt! - faultEnd} ms after the fault; ${slowest.attempts} submission(s); answers: ${steps.join(", ")}`,
      );
      // Its transitions as audit stored them, ms from the fault's end.
      for (const id of slowest.callIds) {
        const { body } = await stack.audit<{ events?: AuditedEvent[] }>(`/v1/calls/${id}/events`);
        const trail = (body.events ?? []).map((e) => `${e.event.type} ${Date.parse(e.event.time) - faultEnd}`);
        console.log(`    ${id}: ${trail.join(", ")}`);
      }
      // What the services said about it (warnings and errors naming one of its call ids), ms from the fault's end.
      for (const proc of stack.processes) {
        for (const line of proc.logs()) {
          if (![...slowest.callIds].some((id) => JSON.stringify(line).includes(id))) continue;
          const at = typeof line.time === "string" ? `${Date.parse(line.time) - faultEnd} ms` : "";
          console.log(`    ${proc.name} ${at}: ${String(line.msg)} ${JSON.stringify(line.err ?? line.reason ?? "")}`.slice(0, 400));
        }
      }
    }
    const invariantsHold = report.lost === 0 && report.duplicateEffects === 0 && report.auditGaps === 0 && report.fiveXX === 0;
    report.passed = invariantsHold && (args.gate === "invariants" || recoveryMs <= RECOVERY_LIMIT_MS);
    if (!invariantsHold) {
      // What the servers said (a FerretDB restarted by the fault that did not come back, say), and how often
      // each service warned, for a failure seen once and not again.
      console.log(`  FerretDB's last output:\n${indent(ferret.recentOutput || "(none)")}`);
      if (nats instanceof PrivateNats) console.log(`  NATS's last output:\n${indent(nats.recentOutput || "(none)")}`);
      for (const proc of stack.processes) {
        const counts = new Map<string, number>();
        for (const line of proc.logs()) {
          if (line.level !== "warn" && line.level !== "error") continue;
          const what = `${String(line.level)} ${String(line.msg)}${line.err ? ` (${String((line.err as { message?: unknown }).message).slice(0, 80)})` : ""}`;
          counts.set(what, (counts.get(what) ?? 0) + 1);
        }
        for (const [what, n] of [...counts].sort((a, b) => b[1] - a[1]).slice(0, 8)) console.log(`  ${proc.name}: ${what} ×${n}`);
      }
    }
    return report;
  } finally {
    forget();
    await stack.stop().catch(() => undefined);
  }
}

/** Logical calls (the `n` the tool recorded with its answer) with more than one effect in the ledger. */
async function duplicateEffectsPerCall(tools: Db): Promise<number> {
  const perCall = new Map<number, number>();
  for await (const effect of tools.collection<{ data_json?: string }>("effects").find({}, { projection: { data_json: 1 } })) {
    const n = effect.data_json === undefined ? -1 : (JSON.parse(effect.data_json) as { n: number }).n;
    perCall.set(n, (perCall.get(n) ?? 0) + 1);
  }
  return [...perCall.values()].filter((count) => count > 1).length;
}

/**
 * Attempts the audit trail cannot account for: an effect in the tool's ledger without a `started` of that call
 * by the executor that applied it, and an attempt claimed in the idempotency store after the first (a retry or
 * a takeover) without any event of that attempt. (An executor that died between claiming attempt 1 and its
 * `started` ran no tool: the attempt that takes it over, and its reconciliation, are the trail.)
 */
async function auditGaps(stack: Stack, runtime: Db, tools: Db, natsUrl: string): Promise<number> {
  const trails = new Map<string, { type: string; attempt: number; payload: { executor_id?: string } }[]>();
  const trail = async (callId: string) => {
    let events = trails.get(callId);
    if (!events) {
      const { body } = await stack.audit<{ events?: { event: { type: string; attempt: number; payload: { executor_id?: string } } }[] }>(
        `/v1/calls/${callId}/events`,
      );
      events = (body.events ?? []).map((e) => e.event);
      trails.set(callId, events);
    }
    return events;
  };
  const gaps: { callId: string; missing: string }[] = [];
  for await (const effect of tools.collection<{ call_id: string; executor: string }>("effects").find({}, { projection: { call_id: 1, executor: 1 } })) {
    const events = await trail(effect.call_id);
    if (!events.some((e) => e.type === "started" && e.payload.executor_id === effect.executor)) {
      gaps.push({ callId: effect.call_id, missing: `started by ${effect.executor}` });
    }
  }
  const callOfKey = new Map<string, string>();
  for await (const key of runtime.collection<{ _id: string; call_id: string }>("idempotency_keys").find({}, { projection: { call_id: 1 } })) {
    callOfKey.set(key._id, key.call_id);
  }
  for await (const step of runtime
    .collection<{ key: string; kind: string; attempt: number }>("idempotency_keys_steps")
    .find({ kind: { $in: ["takeover", "start"] } })) {
    const callId = callOfKey.get(step.key);
    if (callId && !(await trail(callId)).some((e) => e.attempt === step.attempt))
      gaps.push({ callId, missing: `any event of attempt ${step.attempt} (${step.kind})` });
  }
  if (gaps.length > 0) await describeGaps(stack, natsUrl, gaps.slice(0, 5), trail);
  return gaps.length;
}

/**
 * Prints, for a few audit gaps, what the events stream holds for the call next to what audit stored: tells a
 * consumer that missed events from a publish that never landed.
 */
async function describeGaps(
  stack: Stack,
  natsUrl: string,
  gaps: { callId: string; missing: string }[],
  trail: (callId: string) => Promise<{ type: string; attempt: number; payload: { executor_id?: string } }[]>,
): Promise<void> {
  const held = await streamHolds(
    stack,
    natsUrl,
    gaps.map((g) => g.callId),
  );
  for (const { callId, missing } of gaps) {
    const audited = (await trail(callId)).map((e) => `${e.type}#${e.attempt}${e.payload.executor_id ? `@${e.payload.executor_id}` : ""}`).join(" ");
    console.log(`  audit gap: call ${callId} lacks ${missing}; stream holds: ${held.get(callId)}; audit holds: ${audited || "nothing"}`);
  }
}

/** The events the stack's stream holds for each call, by type with their counts (e.g. `proposed×1 started×2`). */
async function streamHolds(stack: Stack, natsUrl: string, callIds: string[]): Promise<Map<string, string>> {
  const held = new Map<string, string>();
  const nc = await connect({ servers: natsUrl.split(","), timeout: 5_000 });
  try {
    const jsm = await jetstreamManager(nc);
    for (const callId of callIds) {
      const info = await jsm.streams.info(stack.eventStream, { subjects_filter: `${stack.name}.call.${callId}.*` });
      const types = Object.entries(info.state.subjects ?? {}).map(([subject, count]) => `${subject.split(".").pop()}×${count}`);
      held.set(callId, types.join(" ") || "nothing");
    }
  } catch (error) {
    for (const callId of callIds) held.set(callId, `unknown (${(error as Error).message})`);
  } finally {
    await nc.close();
  }
  return held;
}

/** Runs the wanted scenarios of `scenarios` one after another on one NATS (server or cluster) and FerretDB. */
async function runAll<N extends PrivateNats | PrivateNatsCluster>(
  scenarios: Scenario<N>[],
  startNats: () => Promise<N>,
  on: string,
): Promise<ScenarioReport[]> {
  const wanted = args.scenarios === "all" ? scenarios : scenarios.filter((s) => args.scenarios.split(",").includes(s.name));
  if (wanted.length === 0) throw new Error(`no such scenario${args.cluster ? " with --cluster" : ""}; known: ${scenarios.map((s) => s.name).join(", ")}`);
  const [nats, ferret] = await Promise.all([startNats(), PrivateFerretDb.start()]);
  const forgetServers = [stopOnInterrupt(nats), stopOnInterrupt(ferret)];
  const mongo = await new MongoClient(ferret.url, { serverSelectionTimeoutMS: 30_000 }).connect();
  const reports: ScenarioReport[] = [];
  try {
    for (const scenario of wanted) {
      console.log(`${scenario.name}: ${RATE} calls/s of chaos_write, 2 executors, ${on}${SHORT ? " (short)" : ""}`);
      const report = await runScenario(scenario, nats, ferret, mongo);
      reports.push(report);
      console.log(`  ${summary(report)}`);
    }
  } finally {
    await mongo.close();
    forgetServers.forEach((forget) => forget());
    await Promise.all([nats.stop(), ferret.stop()]);
  }
  return reports;
}

async function main(): Promise<number> {
  const reports = args.cluster
    ? await runAll(CLUSTER_SCENARIOS, () => PrivateNatsCluster.start({ identities: "local-tools" }), "a three-node NATS cluster, R3 streams")
    : await runAll(SCENARIOS, () => PrivateNats.start({ identities: "local-tools" }), "one NATS server");
  console.log("\nscenario            submitted terminal lost dup-effects dup-calls audit-gaps 5xx 503  recovery  verdict");
  for (const r of reports) {
    console.log(
      `${r.scenario.padEnd(19)} ${String(r.submitted).padStart(9)} ${String(r.terminal).padStart(8)} ${String(r.lost).padStart(4)} ${String(r.duplicateEffects).padStart(11)} ` +
        `${String(r.duplicateCalls).padStart(9)} ${String(r.auditGaps).padStart(10)} ${String(r.fiveXX).padStart(3)} ${String(r.unavailable503).padStart(4)} ` +
        `${(r.recoveryMs / 1_000).toFixed(1).padStart(7)} s  ${r.passed ? "pass" : "FAIL"}`,
    );
  }
  if (args.json) writeFileSync(args.json, JSON.stringify({ rate: RATE, short: SHORT, cluster: args.cluster, reports }, null, 2));
  return reports.every((r) => r.passed) ? 0 : 1;
}

function summary(r: ScenarioReport): string {
  return (
    `submitted ${r.submitted}, terminal ${r.terminal}, lost ${r.lost}, duplicate effects ${r.duplicateEffects}, audit gaps ${r.auditGaps}, ` +
    `5xx ${r.fiveXX} (503: ${r.unavailable503}), recovery ${(r.recoveryMs / 1_000).toFixed(1)} s: ${r.passed ? "pass" : "FAIL"}`
  );
}

// Exit at once: the drain's deadline timer of the last scenario, and the load's last retries, would keep the
// process up for no purpose (stdout to a file or a pipe is written synchronously on Linux).
process.exit(await main());
