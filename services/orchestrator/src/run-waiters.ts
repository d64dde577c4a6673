import type { EventBus, Subscription } from "@toolgate/bus";
import type { RunId, SubjectCatalogue } from "@toolgate/contracts";

/**
 * Lets an API request wait for a managed run to end without polling the store: woken by the run's live
 * `completed` or `stopped` event (whichever replica ended it), with a slow poll behind it for an event missed
 * during a reconnect. The caller reads the run again when woken.
 */
export class RunWaiters {
  readonly #waiting = new Map<RunId, Set<() => void>>();
  readonly #watches: Subscription[];
  readonly #pollMs: number;

  constructor(deps: { bus: EventBus; subjects: SubjectCatalogue; pollMs?: number }) {
    this.#pollMs = deps.pollMs ?? 2_000;
    const runIdOf = (subject: string): string => subject.split(".")[2] ?? "";
    this.#watches = (["completed", "stopped"] as const).map((type) =>
      deps.bus.watch(
        deps.subjects.runEvents(type),
        (subject) => this.#waiting.has(runIdOf(subject)),
        (event) => this.wake(event.run_id),
      ),
    );
  }

  /** Wakes every request waiting for `runId` (called too when this process ends a run). */
  wake(runId: RunId): void {
    const listeners = this.#waiting.get(runId);
    if (!listeners) return;
    this.#waiting.delete(runId);
    for (const listener of listeners) listener();
  }

  /**
   * Calls `check` until it returns something or `timeoutMs` passes: at once, whenever the run's end is
   * announced, and every poll interval. Returns the last value `check` gave (undefined if it never did).
   */
  async until<T>(runId: RunId, timeoutMs: number, check: () => Promise<T | undefined>): Promise<T | undefined> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      let listener: (() => void) | undefined;
      // Registered before the check, so an end announced while the check reads is not missed.
      const woken = new Promise<void>((resolve) => {
        listener = resolve;
        const set = this.#waiting.get(runId) ?? new Set();
        set.add(listener);
        this.#waiting.set(runId, set);
      });
      let timer: NodeJS.Timeout | undefined;
      try {
        const value = await check();
        const left = deadline - Date.now();
        if (value !== undefined || left <= 0) return value;
        await Promise.race([woken, new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.min(left, this.#pollMs))))]);
      } finally {
        clearTimeout(timer);
        const set = this.#waiting.get(runId);
        set?.delete(listener!);
        if (set?.size === 0) this.#waiting.delete(runId);
      }
    }
  }

  /** Stops watching the bus. */
  close(): void {
    for (const watch of this.#watches) watch.unsubscribe();
  }
}
