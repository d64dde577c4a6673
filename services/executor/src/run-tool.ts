import type { ToolContext, ToolHandler, ToolOutcome } from "@toolgate/registry";
import type { JsonValue } from "@toolgate/contracts";

/** How one invocation of a tool ended, as far as the executor could observe it. */
export type ToolRun =
  | { kind: "returned"; outcome: ToolOutcome; durationMs: number }
  | { kind: "timed_out"; durationMs: number }
  | { kind: "threw"; error: unknown; durationMs: number };

/**
 * Runs a handler with the contract's timeout. The AbortSignal reaches the tool; if the tool does not stop,
 * its late result is ignored. Never throws.
 */
export async function runTool(
  handler: ToolHandler,
  args: Record<string, JsonValue>,
  context: Omit<ToolContext, "signal">,
  timeoutMs: number,
  shutdown: AbortSignal,
): Promise<ToolRun> {
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
  const onShutdown = (): void => controller.abort(new Error("executor shutting down"));
  shutdown.addEventListener("abort", onShutdown, { once: true });
  try {
    const result = await Promise.race([handler(args, { ...context, signal: controller.signal }).then((outcome) => ({ outcome })), timedOut]);
    if (result === "timeout") return { kind: "timed_out", durationMs: elapsed() };
    return { kind: "returned", outcome: result.outcome, durationMs: elapsed() };
  } catch (error) {
    return { kind: "threw", error, durationMs: elapsed() };
  } finally {
    clearTimeout(timer);
    shutdown.removeEventListener("abort", onShutdown);
  }
}
