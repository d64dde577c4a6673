import type { EventBus, Subscription } from "@toolgate/bus";
import type { CallId, ResultEnvelope, SubjectCatalogue } from "@toolgate/contracts";
import type { RunStore } from "./run-store.js";

type Listener = (result: ResultEnvelope) => void;

/**
 * Lets an API request wait for terminal results. This process is told directly when it attaches a result;
 * a result attached by another orchestrator replica is noticed from its live `result_attached` event and
 * read from the store. A slow poll covers notifications lost during a reconnect.
 */
export class CallWaiters {
  readonly #waiting = new Map<CallId, Set<Listener>>();
  /** Attaches being stored of outcomes already answered (see {@link attaching}). */
  readonly #attaching = new Map<CallId, Promise<unknown>>();
  readonly #store: RunStore;
  readonly #pollMs: number;
  readonly #watch: Subscription;

  constructor(deps: { store: RunStore; bus: EventBus; subjects: SubjectCatalogue; pollMs?: number }) {
    this.#store = deps.store;
    this.#pollMs = deps.pollMs ?? 5_000;
    const callIdOf = (subject: string): string => subject.split(".")[2] ?? "";
    this.#watch = deps.bus.watch(
      deps.subjects.callEvents("result_attached"),
      (subject) => this.#waiting.has(callIdOf(subject)),
      (event) => {
        if (event.kind !== "call") return;
        void this.#store
          .getResult(event.call_id)
          .then((stored) => stored && this.resolve(event.call_id, stored.result))
          .catch(() => undefined);
      },
    );
  }

  /** Called whenever a result is attached; wakes every request waiting for that call. */
  resolve(callId: CallId, result: ResultEnvelope): void {
    const listeners = this.#waiting.get(callId);
    if (!listeners) return;
    this.#waiting.delete(callId);
    for (const listener of listeners) listener(result);
  }

  /**
   * Says that the outcome of `callId`, already given to its waiters, is being stored by `write`. A request that
   * asks for it in between — registered too late to be told, too early to find it stored — waits for this write
   * instead of for its whole timeout (see {@link storedResult}).
   */
  attaching(callId: CallId, write: Promise<unknown>): void {
    this.#attaching.set(callId, write);
    const done = () => {
      if (this.#attaching.get(callId) === write) this.#attaching.delete(callId);
    };
    write.then(done, done);
  }

  /** The stored result of `callId`, once an attach of it this process has in flight has settled. */
  async storedResult(callId: CallId): ReturnType<RunStore["getResult"]> {
    await this.#attaching.get(callId)?.catch(() => undefined);
    return this.#store.getResult(callId);
  }

  /**
   * Starts listening for the results of `callIds` (before they are published, so none is missed); the
   * returned handle waits for them and must be waited on once, which also stops the listening. With
   * `storedFirst`, the first wait reads the results already stored before it waits (calls that may have ended
   * before they were registered).
   */
  register(callIds: readonly CallId[], options: { storedFirst?: boolean } = {}): { wait(timeoutMs: number): Promise<Map<CallId, ResultEnvelope>> } {
    const results = new Map<CallId, ResultEnvelope>();
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
        const stored = await this.storedResult(id);
        if (stored) accept(id)(stored.result);
      }
    };
    return {
      wait: async (timeoutMs) => {
        let timer: NodeJS.Timeout | undefined;
        let poller: NodeJS.Timeout | undefined;
        try {
          if (options.storedFirst) await poll();
          if (results.size < callIds.length && timeoutMs > 0) {
            poller = setInterval(() => void poll().catch(() => undefined), Math.min(this.#pollMs, timeoutMs));
            await Promise.race([allDone, new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
          }
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
      },
    };
  }

  /** Stops watching the bus. */
  close(): void {
    this.#watch.unsubscribe();
  }
}
