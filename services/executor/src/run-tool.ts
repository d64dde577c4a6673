import type { ToolOutcome } from "@toolgate/registry";
import type { ShutdownFanout } from "./shutdown-fanout.js";

/**
 * What an invocation produced, before the executor judges it against the contract. `evidence` holds details
 * for operators (a far side's error body, for instance) that never reach the model.
 */
export interface ToolAnswer {
  outcome: ToolOutcome;
  evidence?: Record<string, unknown>;
  /** Who answered: kept in the audit chain with the result (see `completed.downstream`). */
  downstream?: Downstream;
}

/** The downstream that answered a call: its transport, its own request id, and a digest of its raw answer. */
export interface Downstream {
  transport: "in_process" | "http" | "mcp";
  request_id?: string;
  raw_output_hash?: string;
}

/** A downstream's request id as the audit chain keeps it: printable ASCII, at most 256 characters, or none. */
export function requestIdOf(value: unknown): string | undefined {
  const text: unknown = Array.isArray(value) ? (value as unknown[])[0] : value;
  return typeof text === "string" && /^[\x21-\x7e]{1,256}$/.test(text) ? text : undefined;
}

/** How one invocation of a tool ended, as far as the executor could observe it. */
export type ToolRun =
  | { kind: "returned"; answer: ToolAnswer; durationMs: number }
  | { kind: "timed_out"; durationMs: number }
  | { kind: "threw"; error: unknown; durationMs: number };

/**
 * Runs `work` with a timeout. The AbortSignal it receives (its own) is aborted at the timeout or when the process
 * shuts down; if the work does not stop, its late answer is ignored. Never throws.
 */
export async function runTool(work: (signal: AbortSignal) => Promise<ToolAnswer>, timeoutMs: number, shutdown: ShutdownFanout): Promise<ToolRun> {
  const controller = new AbortController();
  const started = performance.now();
  const elapsed = (): number => Math.round((performance.now() - started) * 100) / 100;
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<"timeout">((resolve) => {
    timer = setTimeout(() => {
      controller.abort(new Error("tool timeout"));
      resolve("timeout");
    }, timeoutMs);
  });
  const release = shutdown.enlist(controller);
  try {
    let started: Promise<ToolAnswer>;
    try {
      started = work(controller.signal);
    } catch (error) {
      started = Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
    const invocation = started.then((answer) => ({ answer }));
    // A late rejection after the timeout must not become an unhandled rejection.
    invocation.catch(() => undefined);
    const result = await Promise.race([invocation, timedOut]);
    // Timers may fire a fraction of a millisecond early by this clock; a timed-out run lasted its whole timeout.
    if (result === "timeout") return { kind: "timed_out", durationMs: Math.max(elapsed(), timeoutMs) };
    return { kind: "returned", answer: result.answer, durationMs: elapsed() };
  } catch (error) {
    return { kind: "threw", error, durationMs: elapsed() };
  } finally {
    clearTimeout(timer);
    release();
  }
}
