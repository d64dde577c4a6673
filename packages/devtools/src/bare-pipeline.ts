/**
 * The bare JetStream pipeline: Toolgate's hops with no logic and no database, the yardstick the end-to-end
 * benchmark measures Toolgate against side by side. Four processes shaped like the real services (an
 * orchestrator driving the load, policy and executor each turning one event into the next, an audit consumer
 * reading everything) share one file-backed stream with the same publish discipline (Nats-Msg-Id, awaited
 * PubAck) and explicit acks, so what it sustains is what the bus itself carries on this machine.
 *
 *   node packages/devtools/dist/bare-pipeline.js <orchestrator|policy|executor|audit> <json-config>
 */
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { basename } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath, pathToFileURL } from "node:url";
import {
  AckPolicy,
  DeliverPolicy,
  DiscardPolicy,
  jetstream,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
} from "@nats-io/jetstream";
import { nanos, type NatsConnection } from "@nats-io/nats-core";
import { connect } from "@nats-io/transport-node";
import { processCpuMs } from "./process-cpu.js";

/**
 * Which messages a call makes. `hops`: Toolgate's hops alone, three events (proposed, authorized, completed).
 * `toolgate`: every message a no-op host call makes in Toolgate, still without logic or database: a claim on a
 * ledger stream (a publish expecting an empty subject) before `proposed`, `started` alongside `completed`, and
 * `result_attached` once the call is answered; audit reads the five events. The first is the yardstick the issue
 * sets; the second says how much of the distance to it is the bus carrying more messages per call.
 */
export type BareMessages = "hops" | "toolgate";

export interface BarePipelineOptions {
  natsUrl: string;
  /** Default `hops`. */
  messages?: BareMessages;
  /** Calls in flight during the throughput phase (closed loop). */
  concurrency: number;
  durationS: number;
  /** Calls run one at a time for the idle latency. */
  idleCalls: number;
  /** Calls run one at a time after the load warm-up, before the idle ones are measured (default 0). */
  idleWarmupCalls?: number;
}

/** One phase's outcome; latencies in milliseconds. */
export interface BarePhase {
  calls: number;
  seconds: number;
  rate: number;
  p50: number;
  p99: number;
}

export interface BarePipelineResult {
  idle: BarePhase;
  throughput: BarePhase;
  /** CPU milliseconds per call during the throughput phase, by process (orchestrator, policy, executor, audit) and for nats-server. */
  cpuMsPerCall: Record<string, number>;
}

const ROLES = ["orchestrator", "policy", "executor", "audit"] as const;
type Role = (typeof ROLES)[number];

/** What the parent hands each child on its command line. */
interface ChildConfig {
  natsUrl: string;
  messages: BareMessages;
  stream: string;
  prefix: string;
  concurrency: number;
  durationS: number;
  idleCalls: number;
  idleWarmupCalls: number;
}

/** Handlers a policy or executor process runs at once (its consumer's max_ack_pending); the real services bound theirs too. */
const WORKER_SLOTS = 256;
/** Pull requests ask for more than can be in flight, so a delivery never waits for the next pull request. */
const PULL_BATCH = 512;
const AUDIT_PULL_BATCH = 1024;
/** Above every process's in-flight plus buffered messages, so the server never throttles deliveries. */
const MAX_ACK_PENDING = 4096;
const WARMUP_S = 1;
const SELF = fileURLToPath(import.meta.url);
const encoder = new TextEncoder();

/** Spawns the four processes, runs the idle and throughput phases, stops everything, deletes the stream. */
export async function runBarePipeline(options: BarePipelineOptions): Promise<BarePipelineResult> {
  for (const key of ["concurrency", "durationS", "idleCalls"] as const) {
    if (!Number.isFinite(options[key]) || options[key] <= 0) throw new RangeError(`${key} must be positive, got ${options[key]}`);
  }
  const prefix = `bare${randomBytes(4).toString("hex")}`;
  const stream = `${prefix.toUpperCase()}_EVENTS`;
  const claims = `${prefix.toUpperCase()}_CLAIMS`;
  const config: ChildConfig = { ...options, messages: options.messages ?? "hops", idleWarmupCalls: options.idleWarmupCalls ?? 0, stream, prefix };
  const nc = await connect({ servers: options.natsUrl.split(","), name: `${prefix}-parent` });
  const jsm = await jetstreamManager(nc);
  const children: Child[] = [];
  try {
    // File-backed, one replica, like the dev stack's streams; the claims' like the ledger of host call ids.
    const fileStream = { retention: RetentionPolicy.Limits, storage: StorageType.File, discard: DiscardPolicy.Old, num_replicas: 1 };
    await jsm.streams.add({ ...fileStream, name: stream, subjects: [`${prefix}.call.>`], duplicate_window: nanos(120_000) });
    if (config.messages === "toolgate") await jsm.streams.add({ ...fileStream, name: claims, subjects: [`${prefix}.claim.>`] });
    // Every consumer exists before any child starts, so no message can be published ahead of its reader.
    const filters: Record<Role, string | undefined> = {
      orchestrator: `${prefix}.call.*.completed`,
      policy: `${prefix}.call.*.proposed`,
      executor: `${prefix}.call.*.authorized`,
      audit: undefined,
    };
    for (const role of ROLES) {
      const filter = filters[role];
      await jsm.consumers.add(stream, {
        durable_name: role,
        ack_policy: AckPolicy.Explicit,
        deliver_policy: DeliverPolicy.All,
        max_ack_pending: role === "policy" || role === "executor" ? WORKER_SLOTS : MAX_ACK_PENDING,
        ...(filter === undefined ? {} : { filter_subject: filter }),
      });
    }

    for (const role of ROLES) children.push(new Child(role, config));
    // Node start-up on a loaded two-core machine can take seconds; a minute means something is wrong.
    await Promise.all(children.map((child) => child.next((m) => m.ready === true, "ready", 60_000)));
    const orchestrator = children[0]!;
    const natsPids = natsServerPids(options.natsUrl);
    const pids = (): Record<string, number[]> => ({
      ...Object.fromEntries(children.map((child) => [child.role, [child.pid]])),
      ...(natsPids.length > 0 ? { "nats-server": natsPids } : {}),
    });

    orchestrator.send("go");
    const idleBudgetMs = 120_000 + (options.idleCalls + config.idleWarmupCalls) * 100;
    await orchestrator.next((m) => m.phase === "throughput" && m.at === "start", "the throughput phase's start", idleBudgetMs);
    const before = readCpu(pids());
    await orchestrator.next((m) => m.phase === "throughput" && m.at === "end", "the throughput phase's end", options.durationS * 1000 + 60_000);
    const atEnd = readCpu(pids());
    const report = await orchestrator.next((m) => "idle" in m && "throughput" in m, "the orchestrator's results", 30_000);
    // Audit trails the critical path; its backlog (and the server's work delivering it) belongs to these calls too.
    await settle(jsm, stream, 30_000);
    const after = { ...atEnd, ...readCpu(pids()) };

    const idle = asPhase(report.idle, "idle");
    const throughput = asPhase(report.throughput, "throughput");
    const cpuMsPerCall: Record<string, number> = {};
    for (const [name, start] of Object.entries(before)) {
      const end = after[name];
      if (end !== undefined) cpuMsPerCall[name] = (end - start) / throughput.calls;
    }
    const code = await withTimeout(orchestrator.exited, 30_000, "the orchestrator's exit");
    if (code !== 0) throw new Error(`the orchestrator exited with code ${code}`);
    return { idle, throughput, cpuMsPerCall };
  } finally {
    await Promise.all(children.map((child) => child.stop()));
    for (const name of config.messages === "toolgate" ? [stream, claims] : [stream]) {
      try {
        await jsm.streams.delete(name);
      } catch (error) {
        // Never mask the run's own error; an absent stream (creation failed) is expected here.
        console.error(`bare pipeline: could not delete stream ${name}:`, error);
      }
    }
    await nc.close();
  }
}

/** One spawned role: its JSON lines on stdout become a mailbox the parent waits on. */
class Child {
  readonly role: Role;
  /** Resolves with the exit code (null when killed by a signal); never rejects. */
  readonly exited: Promise<number | null>;
  readonly #proc: ChildProcess;
  readonly #mailbox: Record<string, unknown>[] = [];
  readonly #waiters = new Set<{ match: (m: Record<string, unknown>) => boolean; resolve: (m: Record<string, unknown>) => void; reject: (e: Error) => void }>();
  #gone: string | undefined;

  constructor(role: Role, config: ChildConfig) {
    this.role = role;
    this.#proc = spawn(process.execPath, [SELF, role, JSON.stringify(config)], { stdio: ["pipe", "pipe", "inherit"] });
    createInterface({ input: this.#proc.stdout! }).on("line", (line) => this.#receive(line));
    this.exited = new Promise((resolve) => {
      const gone = (why: string, code: number | null): void => {
        if (this.#gone !== undefined) return;
        this.#gone = why;
        for (const waiter of this.#waiters) waiter.reject(new Error(`bare pipeline ${role} ${why}`));
        this.#waiters.clear();
        resolve(code);
      };
      this.#proc.once("exit", (code, signal) => gone(`exited (code ${code}, signal ${signal})`, code));
      this.#proc.once("error", (error) => gone(`failed: ${error.message}`, null));
    });
  }

  get pid(): number {
    if (this.#proc.pid === undefined) throw new Error(`bare pipeline ${this.role} has no pid`);
    return this.#proc.pid;
  }

  /** The first message (already received or still to come) that matches, taken out of the mailbox. */
  next(match: (m: Record<string, unknown>) => boolean, what: string, timeoutMs: number): Promise<Record<string, unknown>> {
    const index = this.#mailbox.findIndex(match);
    if (index >= 0) return Promise.resolve(this.#mailbox.splice(index, 1)[0]!);
    if (this.#gone !== undefined) return Promise.reject(new Error(`bare pipeline ${this.role} ${this.#gone} before ${what}`));
    const waiting = new Promise<Record<string, unknown>>((resolve, reject) => {
      this.#waiters.add({ match, resolve, reject: (error) => reject(new Error(`${error.message} before ${what}`)) });
    });
    return withTimeout(waiting, timeoutMs, `${what} from ${this.role}`);
  }

  send(line: string): void {
    this.#proc.stdin?.write(`${line}\n`);
  }

  /** SIGTERM, then SIGKILL if it has not drained within five seconds. */
  async stop(): Promise<void> {
    if (this.#gone !== undefined) return;
    this.#proc.kill("SIGTERM");
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<"late">((resolve) => (timer = setTimeout(() => resolve("late"), 5_000)));
    const code = await Promise.race([this.exited, late]);
    clearTimeout(timer);
    if (code === "late") {
      console.error(`bare pipeline: ${this.role} ignored SIGTERM, killing it`);
      this.#proc.kill("SIGKILL");
      await this.exited;
    } else if (code !== 0) {
      console.error(`bare pipeline: ${this.role} exited with code ${code} on SIGTERM`);
    }
  }

  #receive(line: string): void {
    let message: unknown;
    try {
      message = JSON.parse(line);
    } catch {
      message = undefined;
    }
    if (typeof message !== "object" || message === null || Array.isArray(message)) {
      console.error(`[bare ${this.role}] ${line}`);
      return;
    }
    const record = message as Record<string, unknown>;
    for (const waiter of this.#waiters) {
      if (!waiter.match(record)) continue;
      this.#waiters.delete(waiter);
      waiter.resolve(record);
      return;
    }
    this.#mailbox.push(record);
  }
}

async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`bare pipeline: timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Waits until every consumer of the stream has nothing pending and nothing unacknowledged. */
async function settle(jsm: JetStreamManager, stream: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    let busy = false;
    for (const role of ROLES) {
      const info = await jsm.consumers.info(stream, role);
      if (info.num_pending > 0 || info.num_ack_pending > 0) busy = true;
    }
    if (!busy) return;
    if (Date.now() > deadline) throw new Error(`bare pipeline: consumers of ${stream} still busy after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** CPU milliseconds used so far, summed per name; a name whose processes are all gone is left out. */
function readCpu(pids: Record<string, number[]>): Record<string, number> {
  const totals: Record<string, number> = {};
  for (const [name, list] of Object.entries(pids)) {
    for (const pid of list) {
      const ms = processCpuMs(pid);
      if (ms !== undefined) totals[name] = (totals[name] ?? 0) + ms;
    }
  }
  return totals;
}

/**
 * The nats-server processes on this host. With several (a local cluster, or an unrelated server) keep the ones
 * whose command line or environment (infra/nats/ configurations read the address from it) names our port.
 */
function natsServerPids(natsUrl: string): number[] {
  const found: { pid: number; args: string[] }[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    let args: string[];
    try {
      args = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0");
    } catch {
      continue;
    }
    if (!basename(args[0] ?? "").includes("nats-server")) continue;
    try {
      args.push(...readFileSync(`/proc/${entry}/environ`, "utf8").split("\0"));
    } catch {
      // Another user's process: its command line is all there is to go by.
    }
    found.push({ pid: Number(entry), args });
  }
  if (found.length <= 1) return found.map((p) => p.pid);
  const first = natsUrl.split(",")[0] ?? "";
  const port = URL.canParse(first) ? new URL(first).port || "4222" : "4222";
  const onPort = found.filter((p) => p.args.some((arg) => arg === port || arg.endsWith(`:${port}`)));
  return (onPort.length > 0 ? onPort : found).map((p) => p.pid);
}

function asPhase(value: unknown, name: string): BarePhase {
  const phase = value as Partial<Record<keyof BarePhase, unknown>> | null;
  const keys = ["calls", "seconds", "rate", "p50", "p99"] as const;
  if (typeof phase !== "object" || phase === null || !keys.every((k) => typeof phase[k] === "number")) {
    throw new Error(`bare pipeline: malformed ${name} phase from the orchestrator: ${JSON.stringify(value)}`);
  }
  const result = phase as BarePhase;
  if (result.calls <= 0) throw new Error(`bare pipeline: the ${name} phase completed no calls`);
  return result;
}

function summarise(latencies: number[], seconds: number): BarePhase {
  const sorted = [...latencies].sort((a, b) => a - b);
  const rank = (q: number): number => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? Number.NaN;
  return { calls: sorted.length, seconds, rate: sorted.length / seconds, p50: rank(0.5), p99: rank(0.99) };
}

// ---- The child processes ----

function say(message: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

function parseObject(text: string): Record<string, unknown> {
  const value: unknown = JSON.parse(text);
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new TypeError("event is not a JSON object");
  return value as Record<string, unknown>;
}

/** Subjects are `<prefix>.call.<callId>.<type>`, and the prefix is one token. */
function callIdOf(subject: string): string {
  const id = subject.split(".")[2];
  if (id === undefined) throw new TypeError(`not a call subject: ${subject}`);
  return id;
}

function objectField(event: Record<string, unknown>, key: string): Record<string, unknown> {
  const value = event[key];
  return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

/** How one role handles a delivery; called synchronously, in arrival order, as the client parses the socket. */
type OnMessage = (msg: JsMsg) => void;

/**
 * Connects, binds the role's durable consumer and runs until SIGTERM (the orchestrator: until its phases are
 * done). Deliveries go to a callback rather than an async iterator: a whole socket read is handled in one
 * tick, so the publishes and acks it causes leave in one write instead of one write per message.
 */
async function runRole(role: Role, config: ChildConfig): Promise<void> {
  // Without noAsyncTraces every request (each PubAck wait) builds two Error objects with stack traces up front,
  // a fifth of a publisher's CPU here; they only enrich timeout errors.
  const nc = await connect({ servers: config.natsUrl.split(","), name: `${config.prefix}-${role}`, noAsyncTraces: true });
  const js = jetstream(nc, { timeout: 10_000 });
  const inFlight = new Set<Promise<void>>();
  let onMessage: OnMessage;
  let drive: (() => Promise<void>) | undefined;
  switch (role) {
    case "orchestrator": {
      const orchestrator = orchestratorRole(nc, js, config, inFlight);
      onMessage = orchestrator.onMessage;
      drive = orchestrator.drive;
      break;
    }
    case "policy":
      onMessage = workerRole(js, config, inFlight, [["authorized", authorizedEvent]]);
      break;
    case "executor":
      onMessage = workerRole(
        js,
        config,
        inFlight,
        config.messages === "toolgate"
          ? [
              ["started", startedEvent],
              ["completed", completedEvent],
            ]
          : [["completed", completedEvent]],
      );
      break;
    case "audit":
      onMessage = (msg) => {
        parseObject(msg.string());
        msg.ack();
      };
      break;
  }
  const consumer = await js.consumers.get(config.stream, role);
  const messages = await consumer.consume({
    max_messages: role === "audit" ? AUDIT_PULL_BATCH : PULL_BATCH,
    callback: (msg) => {
      try {
        onMessage(msg);
      } catch (error) {
        console.error(`handling ${msg.subject} failed:`, error);
        msg.nak();
      }
    },
  });
  process.once("SIGTERM", () => {
    void messages.close().catch((error: unknown) => console.error("closing the consumer failed:", error));
  });
  say({ ready: true });
  if (drive) {
    await drive();
    await messages.close();
  }
  const ended = await messages.closed();
  if (ended instanceof Error) throw ended;
  await Promise.all(inFlight);
  await nc.drain();
}

type EventBuilder = (input: Record<string, unknown>, callId: string) => Record<string, unknown>;

/**
 * Policy and executor: turn each delivered event into the next ones, published in order without waiting for each
 * other (as the executor sends a read's `started` ahead of its `completed`). Handlers overlap, so one message's
 * PubAck round trip never holds up the next delivery; the consumer's max_ack_pending ({@link WORKER_SLOTS})
 * bounds how many run at once, since a delivery is acked only after its successors' PubAcks.
 */
function workerRole(js: JetStreamClient, config: ChildConfig, inFlight: Set<Promise<void>>, next: readonly (readonly [string, EventBuilder])[]): OnMessage {
  return (msg) => {
    const callId = callIdOf(msg.subject);
    const input = parseObject(msg.string());
    const publishes = next.map(([type, build]) =>
      js.publish(`${config.prefix}.call.${callId}.${type}`, encoder.encode(JSON.stringify(build(input, callId))), { msgID: `${callId}:${type}:1` }),
    );
    const task: Promise<void> = Promise.all(publishes)
      .then(
        () => msg.ack(),
        (error: unknown) => {
          console.error(`publishing ${next.map(([type]) => type).join(", ")} for ${callId} failed:`, error);
          msg.nak();
        },
      )
      .finally(() => inFlight.delete(task));
    inFlight.add(task);
  };
}

/**
 * The load generator: publishes `proposed`, and a call ends when its `completed` is delivered. With Toolgate's
 * messages a call first claims its key on the ledger stream, and its `result_attached` follows the answer.
 */
function orchestratorRole(
  nc: NatsConnection,
  js: JetStreamClient,
  config: ChildConfig,
  inFlight: Set<Promise<void>>,
): { onMessage: OnMessage; drive: () => Promise<void> } {
  const waiting = new Map<string, () => void>();
  const full = config.messages === "toolgate";
  const onMessage: OnMessage = (msg) => {
    const completed = parseObject(msg.string());
    msg.ack();
    const callId = callIdOf(msg.subject);
    waiting.get(callId)?.();
    waiting.delete(callId);
    if (!full) return;
    const data = encoder.encode(JSON.stringify(resultAttachedEvent(completed, callId)));
    // Tracked with the workers' publishes, so the connection drains only after every PubAck came back.
    const task: Promise<void> = js
      .publish(`${config.prefix}.call.${callId}.result_attached`, data, { msgID: `${callId}:result_attached:1` })
      .then(
        () => undefined,
        (error: unknown) => console.error(`publishing result_attached for ${callId} failed:`, error),
      )
      .finally(() => inFlight.delete(task));
    inFlight.add(task);
  };

  const runId = `run_${randomUUID().replaceAll("-", "")}`;
  const call = async (): Promise<number> => {
    const callId = `call_${randomUUID().replaceAll("-", "")}`;
    const started = performance.now();
    // Registered before publishing: the completion can overtake the PubAck.
    const done = new Promise<void>((resolve) => waiting.set(callId, resolve));
    const data = encoder.encode(JSON.stringify(proposedEvent(callId, runId)));
    if (full) {
      const claim = encoder.encode(
        JSON.stringify({ run_id: runId, call_id: callId, provider_call_id: `call_${callId.slice(5, 29)}`, tool_name: "bench.noop" }),
      );
      await js.publish(`${config.prefix}.claim.${runId}.${callId}`, claim, { msgID: `${callId}:claim`, expect: { lastSubjectSequence: 0 } });
    }
    await js.publish(`${config.prefix}.call.${callId}.proposed`, data, { msgID: `${callId}:proposed:1` });
    await done;
    return performance.now() - started;
  };
  const closedLoop = async (inFlight: number, seconds: number): Promise<BarePhase> => {
    const latencies: number[] = [];
    const started = performance.now();
    const deadline = started + seconds * 1000;
    await Promise.all(
      Array.from({ length: inFlight }, async () => {
        while (performance.now() < deadline) latencies.push(await call());
      }),
    );
    return summarise(latencies, (performance.now() - started) / 1000);
  };

  const drive = async (): Promise<void> => {
    const jsm = await jetstreamManager(nc);
    await waitForGo();
    await closedLoop(config.concurrency, WARMUP_S);
    // Let audit work off the warm-up's backlog so it does not compete with the phases measured next.
    await settle(jsm, config.stream, 30_000);
    for (let i = 0; i < config.idleWarmupCalls; i++) await call();
    const idleLatencies: number[] = [];
    const idleStarted = performance.now();
    for (let i = 0; i < config.idleCalls; i++) idleLatencies.push(await call());
    const idle = summarise(idleLatencies, (performance.now() - idleStarted) / 1000);
    await settle(jsm, config.stream, 30_000);
    say({ phase: "throughput", at: "start" });
    const throughput = await closedLoop(config.concurrency, config.durationS);
    say({ phase: "throughput", at: "end" });
    say({ idle, throughput });
  };
  return { onMessage, drive };
}

/** The parent writes `go` on stdin once every role is ready. */
async function waitForGo(): Promise<void> {
  const lines = createInterface({ input: process.stdin });
  for await (const line of lines) {
    if (line.trim() === "go") break;
  }
  lines.close();
  process.stdin.destroy();
}

// ---- Event bodies, sized like Toolgate's (~0.9 KB proposed, ~1.3 KB authorized, ~0.7 KB completed) ----

const TRACEPARENT = `00-${randomBytes(16).toString("hex")}-${randomBytes(8).toString("hex")}-01`;
/** An Ed25519 signature's size in base64: 64 bytes, 88 characters. */
const SIGNATURE = randomBytes(64).toString("base64");
const PRINCIPAL = { tenant: "bench", subject: "user:bench-operator", roles: ["operator"], auth: "oidc" };

function proposedEvent(callId: string, runId: string): Record<string, unknown> {
  return {
    id: `${callId}:proposed:1`,
    kind: "call",
    type: "proposed",
    call_id: callId,
    run_id: runId,
    seq: 1,
    occurred_at: new Date().toISOString(),
    principal: PRINCIPAL,
    traceparent: TRACEPARENT,
    data: {
      provider_call_id: `call_${callId.slice(5, 29)}`,
      tool_name: "bench.noop",
      arguments_json: JSON.stringify({ query: "the quick brown fox jumps over the lazy dog ".repeat(5), limit: 10, include_metadata: true }),
      context: { model: "scripted:bench", agent: "benchmark", tainted: false, sources: [] },
      turn: 0,
    },
  };
}

/** The envelope of the event that follows `input` in its call. */
function nextEvent(input: Record<string, unknown>, callId: string, type: string, seq: number, data: Record<string, unknown>): Record<string, unknown> {
  return {
    id: `${callId}:${type}:${seq}`,
    kind: "call",
    type,
    call_id: callId,
    run_id: input.run_id,
    seq,
    occurred_at: new Date().toISOString(),
    causation_id: input.id,
    principal: input.principal,
    traceparent: input.traceparent,
    data,
  };
}

function authorizedEvent(input: Record<string, unknown>, callId: string): Record<string, unknown> {
  const proposed = objectField(input, "data");
  const now = new Date();
  return nextEvent(input, callId, "authorized", 2, {
    tool_name: proposed.tool_name,
    tool_version: "1.0.0",
    arguments_json: proposed.arguments_json,
    arguments_hash: `sha256:${"0".repeat(64)}`,
    decision: {
      effect: "allow",
      policy_id: "bench-default",
      policy_version: 7,
      rule_id: "allow-bench-noop",
      reasons: ["tool is in the caller's toolset", "arguments match the tool's schema", "no tainted sources"],
      decided_at: now.toISOString(),
      expires_at: new Date(now.getTime() + 60_000).toISOString(),
      key_id: "policy-key-2025-01",
      signature: SIGNATURE,
    },
  });
}

function startedEvent(input: Record<string, unknown>, callId: string): Record<string, unknown> {
  return nextEvent(input, callId, "started", 3, { executor: "bench-executor-1", attempt: 1, idempotency_key_hash: `sha256:${"0".repeat(64)}` });
}

function completedEvent(input: Record<string, unknown>, callId: string): Record<string, unknown> {
  return nextEvent(input, callId, "completed", 4, {
    outcome: "ok",
    result: { content_type: "application/json", content_json: JSON.stringify({ ok: true, echoed: 10 }), bytes: 24, truncated: false },
    executor: "bench-executor-1",
    duration_ms: 0,
  });
}

function resultAttachedEvent(input: Record<string, unknown>, callId: string): Record<string, unknown> {
  return nextEvent(input, callId, "result_attached", 5, { provider_call_id: `call_${callId.slice(5, 29)}`, ok: true });
}

// ---- Entry point when run as a child ----

const entry = process.argv[1];
if (entry !== undefined && import.meta.url === pathToFileURL(entry).href) {
  const role = process.argv[2];
  const rawConfig = process.argv[3];
  if (!ROLES.includes(role as Role) || rawConfig === undefined) {
    console.error("usage: bare-pipeline.js <orchestrator|policy|executor|audit> <json-config>");
    process.exit(2);
  }
  runRole(role as Role, JSON.parse(rawConfig) as ChildConfig).then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(`bare pipeline ${role} failed:`, error);
      process.exit(1);
    },
  );
}
