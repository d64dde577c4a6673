/**
 * One `abort` listener on the process's shutdown signal, however many tool invocations run at once: each
 * invocation enlists its own controller and releases it when it settles. Listening on the shared signal once
 * per invocation instead would hold one listener per call in flight (128 slots by default), which is what
 * raised `MaxListenersExceededWarning`.
 */
export class ShutdownFanout {
  readonly #signal: AbortSignal;
  readonly #live = new Set<AbortController>();

  constructor(signal: AbortSignal) {
    this.#signal = signal;
    if (!signal.aborted) signal.addEventListener("abort", () => this.#abortAll(), { once: true });
  }

  /** True once the process is shutting down. */
  get aborted(): boolean {
    return this.#signal.aborted;
  }

  /** Controllers enlisted now (invocations in flight). */
  get size(): number {
    return this.#live.size;
  }

  /**
   * Aborts `controller` when the process shuts down (at once if it already has) until the returned release is
   * called. Never throws.
   */
  enlist(controller: AbortController): () => void {
    if (this.#signal.aborted) {
      controller.abort(shutdownReason());
      return () => undefined;
    }
    this.#live.add(controller);
    return () => {
      this.#live.delete(controller);
    };
  }

  #abortAll(): void {
    const live = [...this.#live];
    this.#live.clear();
    for (const controller of live) controller.abort(shutdownReason());
  }
}

function shutdownReason(): Error {
  return new Error("executor shutting down");
}
