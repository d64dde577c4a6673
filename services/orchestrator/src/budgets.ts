import type { RunStopReason } from "@toolgate/contracts";
import { z } from "zod";

/** The limits of one run. Every stop has its own reason, recorded in the run and audited. */
export const BudgetsSchema = z.object({
  max_turns: z.number().int().min(1).max(1_000),
  max_tool_calls: z.number().int().min(1).max(100_000),
  max_wall_clock_ms: z
    .number()
    .int()
    .min(100)
    .max(7 * 24 * 3_600_000),
  /** Input plus output tokens, counted when the provider reports usage. */
  max_tokens: z.number().int().min(1).max(1_000_000_000),
  /** How often the same tool with the same (canonical) arguments may be proposed in one run. */
  max_identical_calls: z.number().int().min(1).max(1_000),
  /** How long one call may wait for a human approval before the run stops. */
  max_approval_wait_ms: z
    .number()
    .int()
    .min(100)
    .max(7 * 24 * 3_600_000),
});
export type Budgets = z.infer<typeof BudgetsSchema>;

/** Why a run stopped (the set its `run.stopped` event carries). */
export type StopReason = RunStopReason;

/** What a run has used so far. */
export interface Usage {
  turns: number;
  tool_calls: number;
  tokens: number;
  /** Proposals per call signature (tool + canonical arguments). */
  signatures: Record<string, number>;
}

/** A budget a model turn would exceed, with a message for the run's result. */
export type BudgetBreach = { reason: StopReason; message: string } | undefined;

/**
 * Checks a model response against the run's budgets before any of its calls is proposed: turns, tool
 * calls, tokens (when reported), identical repeated calls and the wall clock. Pure.
 */
export function checkTurn(budgets: Budgets, usage: Usage, turn: { calls: readonly string[]; tokens: number }, elapsedMs: number): BudgetBreach {
  if (elapsedMs > budgets.max_wall_clock_ms)
    return { reason: "budget_wall_clock", message: `the run exceeded its wall-clock budget of ${budgets.max_wall_clock_ms} ms` };
  if (usage.tokens + turn.tokens > budgets.max_tokens)
    return { reason: "budget_tokens", message: `the run exceeded its budget of ${budgets.max_tokens} tokens` };
  if (usage.tool_calls + turn.calls.length > budgets.max_tool_calls) {
    return { reason: "budget_tool_calls", message: `the run would exceed its budget of ${budgets.max_tool_calls} tool calls` };
  }
  const counts = new Map<string, number>();
  for (const signature of turn.calls) {
    const n = (usage.signatures[signature] ?? 0) + (counts.get(signature) ?? 0) + 1;
    counts.set(signature, (counts.get(signature) ?? 0) + 1);
    if (n > budgets.max_identical_calls)
      return { reason: "repeated_call", message: `the same call was proposed more than ${budgets.max_identical_calls} times` };
  }
  return undefined;
}

/** Whether a run may ask the model for turn `turn`: its turn and wall-clock budgets. Pure. */
export function checkTurnStart(budgets: Budgets, turn: number, elapsedMs: number): BudgetBreach {
  if (turn >= budgets.max_turns) return { reason: "budget_turns", message: `the run reached its limit of ${budgets.max_turns} model turns` };
  return checkWallClock(budgets, elapsedMs);
}

/** Whether a run has used up its wall clock. Pure. */
export function checkWallClock(budgets: Budgets, elapsedMs: number): BudgetBreach {
  if (elapsedMs > budgets.max_wall_clock_ms)
    return { reason: "budget_wall_clock", message: `the run exceeded its wall-clock budget of ${budgets.max_wall_clock_ms} ms` };
  return undefined;
}

/** Whether a final answer (or refusal) fits the run's token budget. Pure. */
export function checkFinalAnswer(budgets: Budgets, usage: Usage, tokens: number): BudgetBreach {
  if (usage.tokens + tokens > budgets.max_tokens) return { reason: "budget_tokens", message: `the run exceeded its budget of ${budgets.max_tokens} tokens` };
  return undefined;
}

/** The first call that has waited for a human longer than the run allows, as a breach. Pure. */
export function checkApprovalWaits(budgets: Budgets, waits: readonly { _id: string; since: Date }[], now: number): BudgetBreach {
  const overdue = waits.find((w) => now - w.since.getTime() > budgets.max_approval_wait_ms);
  if (!overdue) return undefined;
  return { reason: "approval_timeout", message: `call ${overdue._id} waited more than ${budgets.max_approval_wait_ms} ms for approval` };
}
