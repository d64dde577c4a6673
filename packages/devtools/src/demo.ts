/**
 * The C04 demo: starts the four services as processes against real NATS and the Mongo-compatible server,
 * runs the research-agent case and its three failure runs with the scripted model, and prints each run's
 * trace from the audit log (every event with call id, tool, status and duration).
 */
import { Stack } from "@toolgate/testkit/stack";
import { stopOnInterrupt } from "./interrupts.js";
import type { ToolgateEvent } from "@toolgate/contracts";

const NATS_URL = process.env.TOOLGATE_TEST_NATS_URL ?? process.env.NATS_URL ?? "nats://127.0.0.1:4222";
const MONGO_URL = process.env.TOOLGATE_TEST_MONGO_URL ?? process.env.MONGO_URL ?? "mongodb://127.0.0.1:27117";
/** Replicas of the stack's streams: 3 on the cluster of `./infra/dev.sh up --cluster`, which exports it. */
const STREAM_REPLICAS = Number(process.env.STREAM_REPLICAS ?? "1");

const CASES = [
  { title: "C04: search → fetch → save evidence", model: "scripted:c04" },
  { title: "C04 failure run: limit 50 is refused before the tool runs", model: "scripted:c04-invalid-limit" },
  { title: "C04 failure run: the search backend times out", model: "scripted:c04-timeout" },
  { title: "C04 failure run: a query with no match", model: "scripted:c04-no-match" },
];

const TASK_ID = "task_c04";
const INPUT = `Research task task_id=${TASK_ID}: find official documentation on how the OpenAI Agents SDK manages state, read it, and save one verified claim as evidence.`;

function statusOf(event: ToolgateEvent): string {
  if (event.kind === "run") {
    if (event.type === "model_responded") return `${event.payload.outcome}${event.payload.tool_calls ? ` calls=${event.payload.tool_calls}` : ""}`;
    if (event.type === "completed") return `final turns=${event.payload.turns}`;
    if (event.type === "stopped") return `stopped ${event.payload.reason}`;
    if (event.type === "event_refused") return `refused ${event.payload.refused_event_id} (${event.payload.reason})`;
    return `model=${event.payload.model}`;
  }
  switch (event.type) {
    case "proposed":
      return `provider_id=${event.payload.provider_call_id}`;
    case "rejected":
    case "denied":
    case "outcome_unknown":
      return describeResult(event.payload.result);
    case "authorized":
      return `signed by ${event.payload.decision.key_id}`;
    case "started":
      return `attempt=${event.attempt}`;
    case "completed":
      return describeResult(event.payload.result);
    case "result_attached":
      return event.payload.ok ? "attached ok" : "attached error";
    default:
      return "";
  }
}

function describeResult(result: { ok: boolean } & Record<string, unknown>): string {
  if (!result.ok) {
    const error = result.error as { code: string; details?: { violations?: { pointer: string }[] } };
    const pointer = error.details?.violations?.[0]?.pointer;
    return `${error.code}${pointer ? ` at ${pointer}` : ""} retryable=${String(result.retryable)}`;
  }
  const data = result.data as Record<string, unknown>;
  if (Array.isArray(data.items)) return `ok item_count=${data.items.length}`;
  if (typeof data.chars === "number") return `ok chars=${data.chars} truncated=${String(data.truncated)}`;
  if (typeof data.evidence_id === "string") return `ok evidence_id=${data.evidence_id} stored=${String(data.stored)}`;
  return "ok";
}

function toolOf(event: ToolgateEvent, tools: Map<string, string>): string {
  if (event.kind !== "call") return "";
  if (event.type === "proposed") tools.set(event.call_id, event.payload.tool_name);
  return event.tool?.name ?? tools.get(event.call_id) ?? "";
}

async function main(): Promise<void> {
  console.log(`Starting orchestrator, policy, executor and audit as processes (NATS ${NATS_URL}, Mongo ${MONGO_URL})…`);
  const stack = await Stack.start({
    natsUrl: NATS_URL,
    mongoUrl: MONGO_URL,
    streamReplicas: STREAM_REPLICAS,
    logLevel: "warn",
    // The timeout run needs a backend that is slow for one query; the search tool's contract allows 2 s.
    env: { executor: { EXECUTOR_FAULTS: JSON.stringify({ slowSearch: { pattern: "slow backend", delayMs: 5_000 } }) } },
  });
  const forget = stopOnInterrupt(stack);
  let failed = false;
  try {
    for (const c of CASES) {
      const run = await stack.runToEnd(c.model, INPUT, { task_id: TASK_ID });
      const runId = run.run_id;
      const trace = (await stack.trace(runId)).map((e) => ({ event: e.event as unknown as ToolgateEvent }));
      const verify = await stack.audit<{ ok: boolean; chains: unknown[] }>(`/v1/runs/${runId}/verify`);
      const t0 = Date.parse(trace[0]!.event.time);
      const tools = new Map<string, string>();
      console.log(`\n== ${c.title}`);
      console.log(`case=C04 run=${runId} model=${c.model} task_id=${TASK_ID}`);
      for (const { event } of trace) {
        const at = `+${String(Date.parse(event.time) - t0).padStart(5)}ms`;
        const id = event.kind === "call" ? event.call_id : "";
        const duration =
          event.kind === "call" && (event.type === "completed" || event.type === "outcome_unknown") ? `duration_ms=${event.payload.duration_ms}` : "";
        console.log(
          `${at}  ${`${event.kind}.${event.type}`.padEnd(22)} ${id.padEnd(31)} ${toolOf(event, tools).padEnd(15)} ${statusOf(event)} ${duration}`.trimEnd(),
        );
      }
      console.log(`run status=${run.status}${run.stop_reason ? ` reason=${run.stop_reason}` : ""} final="${run.final_text ?? ""}"`);
      console.log(`audit: ${trace.length} events, hash chains ${verify.body.ok ? "verified" : "BROKEN"} (${verify.body.chains.length} chains)`);
      if (!verify.body.ok || run.status !== "completed") failed = true;
    }
  } finally {
    forget();
    await stack.stop();
  }
  if (failed) {
    console.error("\nThe demo did not end as expected.");
    process.exit(1);
  }
  console.log("\nDone: four runs, every call with exactly one terminal outcome, every audit chain verified.");
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
