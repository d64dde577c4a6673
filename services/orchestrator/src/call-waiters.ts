import type { CallId, ResultEnvelope } from "@toolgate/contracts";
import type { RunStore } from "./run-store.js";

/**
 * Lets an API request wait for terminal results. This process is notified directly when it attaches a
 * result; results attached by another orchestrator replica are found by polling the store.
 */
export class CallWaiters {
  readonly #waiting = new Map<CallId, Set<(result: ResultEnvelope) => void>>();
  readonly #store: RunStore;
  readonly #pollMs: number;

  constructor(store: RunStore, pollMs = 500) {
    this.#store = store;
    this.#pollMs = pollMs;
  }

  /** Called by the run loop whenever it attached a result. */
  resolve(callId: CallId, result: ResultEnvelope): void {
    const listeners = this.#waiting.get(callId);
    if (!listeners) return;
    this.#waiting.delete(callId);
    for (const listener of listeners) listener(result);
  }

  /** Waits up to `timeoutMs` for the results of `callIds`; returns those that arrived. */
  async waitFor(callIds: readonly CallId[], timeoutMs: number): Promise<Map<CallId, ResultEnvelope>> {
    const results = new Map<CallId, ResultEnvelope>();
    if (callIds.length === 0) return results;
    let finish: () => void = () => undefined;
    const allDone = new Promise<void>((resolve) => (finish = resolve));
    const accept = (callId: CallId) => (result: ResultEnvelope) => {
      if (results.has(callId)) return;
      results.set(callId, result);
      if (results.size === callIds.length) finish();
    };
    const listeners = callIds.map((id) => {
      const listener = accept(id);
      const set = this.#waiting.get(id) ?? new Set();
      set.add(listener);
      this.#waiting.set(id, set);
      return [id, listener] as const;
    });
    const poll = async (): Promise<void> => {
      for (const id of callIds) {
        if (results.has(id)) continue;
        const stored = await this.#store.getResult(id);
        if (stored) accept(id)(stored.result);
      }
    };
    let timer: NodeJS.Timeout | undefined;
    let poller: NodeJS.Timeout | undefined;
    try {
      // Polling also finds results attached in the moment before these listeners were registered.
      poller = setInterval(() => void poll().catch(() => undefined), this.#pollMs);
      await Promise.race([allDone, new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
    } finally {
      clearTimeout(timer);
      clearInterval(poller);
      for (const [id, listener] of listeners) {
        const set = this.#waiting.get(id);
        set?.delete(listener);
        if (set?.size === 0) this.#waiting.delete(id);
      }
    }
    return results;
  }
}
