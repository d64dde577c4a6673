/** A run as the orchestrator answers `GET /v1/runs/:run_id`, the fields the CLI prints. */
export interface RunView {
  run_id: string;
  status: string;
  model: string;
  final_text?: string;
  stop_reason?: string;
  calls: CallView[];
}

/** A call of a run; `status` is `pending` until it has ended. */
export interface CallView {
  call_id: string;
  provider_call_id: string;
  tool: string;
  status: string;
  result?: { ok: boolean; error?: { code: string } };
}

/** A pending call's state, as the orchestrator's results API tells it apart (`running` or `awaiting_approval`). */
export type PendingState = "running" | "awaiting_approval";

/**
 * The body of `POST /v1/runs`. A model knows only its input, not the run's context, so a task given with
 * `--task` is also named at the front of the input (unless the input names it already): else the model writes
 * to a task it made up, and policy, which holds the run to its context, denies the write.
 */
export function startRunBody(model: string, input: string, task: string | undefined): { model: string; input: string; context: { task_id?: string } } {
  if (!task) return { model, input, context: {} };
  const named = new RegExp(`task[_ ]id[=: ]+${task.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}(?![A-Za-z0-9_-])`, "i").test(input);
  return { model, input: named ? input : `task_id=${task}: ${input}`.trimEnd(), context: { task_id: task } };
}

/** A call's status for people: a pending call says whether it waits for an approval. */
export function callStatus(call: Pick<CallView, "call_id" | "status">, pending: ReadonlyMap<string, PendingState>): string {
  if (call.status !== "pending") return call.status;
  return pending.get(call.call_id) === "awaiting_approval" ? "pending (awaiting approval: see toolgate approvals list)" : "pending";
}

/** A run and one line per call, for `runs start --wait`, `runs get` and `runs cancel`. */
export function describeRun(run: RunView, pending: ReadonlyMap<string, PendingState> = new Map()): string {
  const lines = [`${run.run_id}  ${run.status}${run.stop_reason ? ` (${run.stop_reason})` : ""}  model=${run.model}`];
  for (const c of run.calls)
    lines.push(
      `  ${c.call_id}  ${c.tool.padEnd(16)} ${callStatus(c, pending)}${c.result ? (c.result.ok ? " ok" : ` ${c.result.error?.code ?? "error"}`) : ""}`,
    );
  if (run.final_text) lines.push(`  final: ${run.final_text}`);
  return lines.join("\n");
}
