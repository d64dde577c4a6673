import { randomBytes } from "node:crypto";
import type { JsonValue, ResultEnvelope } from "@toolgate/contracts";
import { MongoClient, type Db } from "mongodb";
import { withTask, type Dataset, type Sample } from "./dataset.js";
import { aggregate, type EvaluationReport } from "./report.js";
import { actionMatches, scoreSample, type ObservedCall, type ObservedEvidence, type SampleScore } from "./scoring.js";

/** A service the evaluation talks to: its base URL and bearer credential (secret: never logged or reported). */
export interface ServiceTarget {
  url: string;
  token?: string | undefined;
}

/** Where the evaluation finds the deployment it measures. */
export interface EvaluationTargets {
  /** The orchestrator's API, with the API key of the principal the runs belong to. */
  orchestrator: ServiceTarget;
  /** Audit's API: the trail each run is scored from. */
  audit: ServiceTarget;
  /**
   * Policy's API with an approver's credential: the simulated human, who approves a call waiting for a human
   * only when it is an action the sample expects (and no more often than the sample expects it), and denies
   * everything else. Without it, such calls wait until the run's approval budget stops the run.
   */
  policy?: ServiceTarget | undefined;
  /** The executor's tool database (`TOOLS_MONGO_DB`): where evidence is checked after each run. */
  tools: Db;
}

export interface EvaluationOptions {
  /** `<provider>:<model>` as `POST /v1/runs` takes it, e.g. `scripted:careful`. */
  model: string;
  repeats?: number;
  /** Runs in flight at once (samples of one repeat). Default 4. */
  concurrency?: number;
  /** Price of a thousand tokens, for cost per task; without it cost is n/a. */
  usdPer1kTokens?: number | undefined;
  /** Longest one run may take, approvals included. Default 120 s. */
  runTimeoutMs?: number;
  /** Told of each finished run, e.g. to print progress. */
  onRun?: (score: SampleScore, repeat: number) => void;
}

/** The evaluation could not be carried out (not: a sample failed). `code` says why; nothing secret in `message`. */
export class EvaluationError extends Error {
  constructor(
    readonly code: "SERVICE_UNREACHABLE" | "SERVICE_ERROR" | "TOOLS_MISSING" | "RUN_TIMEOUT" | "TRAIL_INCOMPLETE",
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = "EvaluationError";
  }
}

interface RunView {
  run_id: string;
  status: string;
  stop_reason?: string;
  usage?: { turns: number; tokens: number };
  turn: number;
  calls: { call_id: string; tool: string; turn: number; status: string; result?: ResultEnvelope }[];
}

interface TrailEvent {
  event: { kind: string; type: string; call_id?: string; tool?: { name: string; version: string; hash: string }; payload: Record<string, unknown> };
}

interface ApprovalView {
  approval_id: string;
  run_id: string;
  call_id: string;
  state: string;
  tool: { name: string };
  arguments: Record<string, JsonValue>;
  plan_hash: string;
}

interface OfferedTool {
  name: string;
  version: string;
  hash: string;
  side_effect: string;
}

async function request<T>(target: ServiceTarget, name: string, method: "GET" | "POST", path: string, body?: unknown): Promise<T> {
  let response: Response;
  try {
    response = await fetch(`${target.url.replace(/\/$/, "")}${path}`, {
      method,
      headers: {
        ...(target.token ? { authorization: `Bearer ${target.token}` } : {}),
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  } catch (error) {
    throw new EvaluationError("SERVICE_UNREACHABLE", `cannot reach the ${name} at ${target.url}`, { cause: error });
  }
  const text = await response.text();
  if (!response.ok) {
    let code = "";
    try {
      const error = (JSON.parse(text) as { error?: { code?: unknown } }).error;
      if (typeof error?.code === "string") code = error.code;
    } catch {
      // An answer that is not JSON: the status says enough.
    }
    throw new EvaluationError("SERVICE_ERROR", `${name} answered ${method} ${path.split("?")[0]} with HTTP ${response.status}${code ? ` ${code}` : ""}`);
  }
  return JSON.parse(text) as T;
}

/** Runs `work` over `items` with at most `limit` in flight, keeping the order of the results. */
async function pooled<T, R>(items: readonly T[], limit: number, work: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array<R>(items.length);
  let next = 0;
  const lanes = Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await work(items[i]!, i);
    }
  });
  await Promise.all(lanes);
  return results;
}

/**
 * Plays every sample of the dataset `repeats` times as managed runs through the deployment, checks each
 * run's final state in the stores, and reports each metric per class and overall. Throws
 * {@link EvaluationError} when the deployment cannot be evaluated (unreachable, a tool the dataset needs is
 * not offered); a sample that fails is a score, not an error.
 */
export async function runEvaluation(dataset: Dataset, targets: EvaluationTargets, options: EvaluationOptions): Promise<EvaluationReport> {
  const repeats = options.repeats ?? 1;
  const startedAt = new Date();
  const offered = (await request<{ tools: OfferedTool[] }>(targets.orchestrator, "orchestrator", "GET", "/v1/tools")).tools;
  const byName = new Map(offered.map((t) => [t.name, t]));
  const missing = [...new Set([...dataset.tools, ...dataset.samples.flatMap((s) => s.tools ?? [])])].filter((ref) => {
    const [name, version] = ref.split("@");
    const tool = byName.get(name!);
    return !tool || (version !== undefined && tool.version !== version);
  });
  if (missing.length > 0) throw new EvaluationError("TOOLS_MISSING", `the deployment does not offer ${missing.join(", ")}`);
  const consequential = new Set(offered.filter((t) => t.side_effect === "write" || t.side_effect === "external").map((t) => t.name));

  const runs: SampleScore[][] = [];
  for (let repeat = 0; repeat < repeats; repeat++) {
    runs.push(
      await pooled(dataset.samples, options.concurrency ?? 4, async (sample, index) => {
        const score = await playSample(sample, index, targets, options, consequential);
        options.onRun?.(score, repeat);
        return score;
      }),
    );
  }
  const usd = options.usdPer1kTokens ?? null;
  return {
    dataset: { name: dataset.name, samples: dataset.samples.length },
    model: options.model,
    repeats,
    contracts: Object.fromEntries(offered.map((t) => [t.name, { version: t.version, hash: t.hash }])),
    started_at: startedAt.toISOString(),
    finished_at: new Date().toISOString(),
    usd_per_1k_tokens: usd,
    ...aggregate(runs, usd),
    runs,
  };
}

/** One managed run of one sample, answered approvals included, then scored from its trail and the store. */
async function playSample(
  sample: Sample,
  index: number,
  targets: EvaluationTargets,
  options: EvaluationOptions,
  consequential: ReadonlySet<string>,
): Promise<SampleScore> {
  const task = `task_eval_${index}_${randomBytes(5).toString("hex")}`;
  const started = Date.now();
  const { run_id: runId } = await request<{ run_id: string }>(targets.orchestrator, "orchestrator", "POST", "/v1/runs", {
    model: options.model,
    input: withTask(sample.input, task),
    context: { task_id: task },
    ...(sample.budgets ? { budgets: sample.budgets } : {}),
  });
  const deadline = started + (options.runTimeoutMs ?? 120_000);
  const approver = new SimulatedApprover(sample, task);
  let run: RunView;
  for (;;) {
    // Long polls: the answer comes as soon as the run ends; shorter while a human may be needed.
    run = await request<RunView>(targets.orchestrator, "orchestrator", "GET", `/v1/runs/${runId}?wait_ms=${targets.policy ? 250 : 5_000}`);
    if (run.status !== "running") break;
    if (Date.now() > deadline)
      throw new EvaluationError("RUN_TIMEOUT", `sample ${sample.id}: run ${runId} still running after ${options.runTimeoutMs ?? 120_000} ms`);
    if (targets.policy) await approver.decide(targets.policy, runId);
  }
  const latencyMs = Date.now() - started;
  const trail = await completeTrail(targets.audit, runId, deadline + 30_000);
  const calls = observedCalls(trail, run, consequential);
  const evidence = await evidenceOf(targets.tools, runId, task, calls);
  return scoreSample(sample, task, {
    run: { run_id: runId, status: run.status, stop_reason: run.stop_reason, turns: run.usage?.turns ?? run.turn + 1, tokens: run.usage?.tokens ?? 0 },
    calls,
    taskEvidence: evidence.task,
    runEvidence: evidence.run,
    latencyMs,
  });
}

/**
 * The human in the loop, simulated: approves a waiting call only when it is an action of the sample's
 * expected paths, not forbidden, and not approved as often as any path holds it already; denies the rest.
 */
class SimulatedApprover {
  readonly #decided = new Set<string>();
  readonly #approved: { tool: string; arguments: Record<string, JsonValue> }[] = [];

  constructor(
    readonly sample: Sample,
    readonly task: string,
  ) {}

  async decide(policy: ServiceTarget, runId: string): Promise<void> {
    const { approvals } = await request<{ approvals: ApprovalView[] }>(policy, "policy service", "GET", "/v1/approvals");
    for (const approval of approvals) {
      if (approval.run_id !== runId || approval.state !== "pending" || this.#decided.has(approval.approval_id)) continue;
      this.#decided.add(approval.approval_id);
      const call = { tool: approval.tool.name, arguments: approval.arguments };
      const approve = this.#acceptable(call);
      if (approve) this.#approved.push(call);
      const body = approve ? { plan_hash: approval.plan_hash } : { plan_hash: approval.plan_hash, reason: "not what the task asked for" };
      try {
        await request(policy, "policy service", "POST", `/v1/approvals/${approval.approval_id}/${approve ? "approve" : "deny"}`, body);
      } catch (error) {
        // A request withdrawn or expired meanwhile has its outcome already; the run goes on without us.
        if (!(error instanceof EvaluationError && error.code === "SERVICE_ERROR")) throw error;
      }
    }
  }

  #acceptable(call: { tool: string; arguments: Record<string, JsonValue> }): boolean {
    const { paths, forbidden } = this.sample.expected;
    if (forbidden.some((a) => actionMatches(a, call, this.task))) return false;
    const allowed = Math.max(0, ...paths.map((p) => p.flat().filter((a) => actionMatches(a, call, this.task)).length));
    const already = this.#approved.filter(
      (c) => c.tool === call.tool && paths.flat(2).some((a) => actionMatches(a, c, this.task) && actionMatches(a, call, this.task)),
    ).length;
    return already < allowed;
  }
}

/** The run's audit trail once it holds the run's end and one `result_attached` per proposed call. */
async function completeTrail(audit: ServiceTarget, runId: string, deadline: number): Promise<TrailEvent[]> {
  for (;;) {
    const { events } = await request<{ events: TrailEvent[] }>(audit, "audit service", "GET", `/v1/runs/${runId}/events`);
    const ended = events.some((e) => e.event.kind === "run" && (e.event.type === "completed" || e.event.type === "stopped"));
    const proposed = events.filter((e) => e.event.type === "proposed").length;
    const attached = events.filter((e) => e.event.type === "result_attached").length;
    if (ended && proposed === attached) return events;
    if (Date.now() > deadline)
      throw new EvaluationError("TRAIL_INCOMPLETE", `the audit trail of ${runId} is incomplete (${proposed} proposed, ${attached} attached)`);
    // Audit consumes behind the run: ask again shortly.
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

function parsedArguments(text: unknown): Record<string, JsonValue> | undefined {
  if (typeof text !== "string") return undefined;
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, JsonValue>) : undefined;
  } catch {
    return undefined;
  }
}

/** Each proposed call with what happened to it, from the trail (and the run view for results). */
function observedCalls(trail: readonly TrailEvent[], run: RunView, consequential: ReadonlySet<string>): ObservedCall[] {
  const results = new Map(run.calls.map((c) => [c.call_id, c.result]));
  const calls = new Map<string, ObservedCall>();
  for (const { event } of trail) {
    if (event.kind !== "call" || !event.call_id) continue;
    if (event.type === "proposed") {
      const tool = String(event.payload.tool_name);
      calls.set(event.call_id, {
        call_id: event.call_id,
        tool,
        turn: Number(event.payload.turn),
        arguments: parsedArguments(event.payload.arguments_json),
        rejected: false,
        executed: false,
        consequential: consequential.has(tool),
        result: results.get(event.call_id),
      });
      continue;
    }
    const call = calls.get(event.call_id);
    if (!call) continue;
    if (event.type === "rejected" && event.payload.stage === "structural") call.rejected = true;
    if (event.type === "started") call.executed = true;
    if (!call.result && (event.type === "completed" || event.type === "outcome_unknown" || event.type === "rejected" || event.type === "denied")) {
      call.result = event.payload.result as ResultEnvelope;
    }
  }
  return [...calls.values()];
}

interface EvidenceDocument {
  task_id: string;
  claim: string;
  source_url: string;
  idempotency_key: string;
}

/**
 * The sample's task's evidence, and every record this run wrote: in the task and in any task its save calls
 * named, attributed to the run by the idempotency key the runtime derived (it holds the run id).
 */
async function evidenceOf(db: Db, runId: string, task: string, calls: readonly ObservedCall[]): Promise<{ task: ObservedEvidence[]; run: ObservedEvidence[] }> {
  const named = calls.flatMap((c) => (typeof c.arguments?.task_id === "string" ? [c.arguments.task_id] : []));
  const tasks = [...new Set([task, ...named])];
  const docs = await db
    .collection<EvidenceDocument>("evidence")
    .find({ task_id: { $in: tasks } }, { projection: { _id: 0, task_id: 1, claim: 1, source_url: 1, idempotency_key: 1 } })
    .toArray();
  const records = docs.map((d) => ({ task_id: d.task_id, claim: d.claim, source_url: d.source_url, idempotency_key: d.idempotency_key }));
  return { task: records.filter((r) => r.task_id === task), run: records.filter((r) => r.idempotency_key.includes(runId)) };
}

/**
 * Connects to the executor's tool database, read-only in use: what {@link EvaluationTargets.tools} takes.
 * Throws {@link EvaluationError} `SERVICE_UNREACHABLE` when the server does not answer.
 */
export async function openToolsDb(url: string, name: string): Promise<{ db: Db; close: () => Promise<void> }> {
  const client = new MongoClient(url, { serverSelectionTimeoutMS: 5_000 });
  try {
    await client.connect();
  } catch (error) {
    throw new EvaluationError("SERVICE_UNREACHABLE", "cannot reach the tools database (TOOLGATE_EVAL_MONGO_URL)", { cause: error });
  }
  return { db: client.db(name), close: () => client.close() };
}
