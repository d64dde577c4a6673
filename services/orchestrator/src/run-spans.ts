import type { RunTraces, Span } from "@toolgate/telemetry";
import type { CallRecord, RunEnd, RunRecord } from "./run-store.js";

/**
 * The orchestrator's spans of a run's trace (see `RunTraces`): the run (`invoke_agent`, recorded once, by whoever
 * ends the run, from its start), each model turn (`chat <model>`) and each call's proposal. Attributes are ids,
 * names, counts and outcomes only: never the user's input, the model's text or a call's arguments.
 */
export function recordRunSpan(traces: RunTraces, run: Pick<RunRecord, "_id" | "model" | "created_at">, end: RunEnd): void {
  traces
    .startRun(run._id, "invoke_agent", {
      startTime: run.created_at,
      attributes: {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.request.model": run.model,
        "toolgate.run_id": run._id,
        "toolgate.status": end.status,
        ...(end.status === "stopped" ? { "toolgate.stop_reason": end.stop_reason, "error.type": end.stop_reason } : {}),
        "toolgate.turns": end.turn + 1,
        "toolgate.tool_calls": end.tool_calls,
        ...(end.usage ? { "toolgate.tokens": end.usage.tokens } : {}),
      },
    })
    .end();
}

/**
 * The span of a host-driven run, the root its calls' spans hang under: recorded when the run is created, since
 * such a run has no end of ours to wait for (the host runs the model; it goes on for as long as it sends calls).
 */
export function recordHostRunSpan(traces: RunTraces, run: Pick<RunRecord, "_id" | "created_at">): void {
  traces
    .startRun(run._id, "host_run", {
      startTime: run.created_at,
      attributes: { "toolgate.run_id": run._id, "toolgate.run.driver": "host" },
    })
    .end();
}

/** Starts the span of the model turn `run` is at, under the run's span. */
export function startTurnSpan(traces: RunTraces, run: Pick<RunRecord, "_id" | "model" | "turn">): Span {
  return traces.startTurn(run._id, run.turn, `chat ${run.model}`, {
    attributes: { "gen_ai.operation.name": "chat", "gen_ai.request.model": run.model, "toolgate.run_id": run._id, "toolgate.turn": run.turn },
  });
}

/** Starts `call`'s proposal span, under its turn's span (a host's call, whose run has no turns of ours: the run's). */
export function startProposalSpan(traces: RunTraces, run: Pick<RunRecord, "_id" | "status">, call: CallRecord): Span {
  const parent = run.status === "external" ? traces.runContext(run._id) : traces.turnContext(run._id, call.turn);
  return traces.startCall(
    call._id,
    "propose_tool_call",
    {
      attributes: {
        "toolgate.step": "proposal",
        "toolgate.run_id": run._id,
        "toolgate.call_id": call._id,
        "gen_ai.tool.name": call.tool_name.slice(0, 128),
        "gen_ai.tool.call.id": call.provider_call_id,
        "toolgate.turn": call.turn,
      },
    },
    parent,
  );
}
