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
