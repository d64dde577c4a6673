/** Waits `ms` milliseconds unless `signal` aborts first. Never rejects; says which happened. */
export function abortableDelay(ms: number, signal: AbortSignal): Promise<"elapsed" | "aborted"> {
  if (signal.aborted) return Promise.resolve("aborted");
  return new Promise((resolve) => {
    const onAbort = (): void => {
      clearTimeout(timer);
      resolve("aborted");
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve("elapsed");
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/** Outcome of {@link raceAbort}. */
export type Raced<T> = { aborted: false; value: T } | { aborted: true };

/**
 * Settles with `work`'s value, or with `{ aborted: true }` as soon as `signal` aborts. `work` keeps running
 * (it cannot be cancelled); its late rejection is observed so it never becomes an unhandled rejection.
 * Rejects only when `work` rejects before the abort.
 */
export function raceAbort<T>(work: Promise<T>, signal: AbortSignal): Promise<Raced<T>> {
  if (signal.aborted) {
    work.catch(() => undefined);
    return Promise.resolve({ aborted: true });
  }
  return new Promise<Raced<T>>((resolve, reject) => {
    const onAbort = (): void => {
      work.catch(() => undefined);
      resolve({ aborted: true });
    };
    signal.addEventListener("abort", onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve({ aborted: false, value });
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error instanceof Error ? error : new Error("work rejected with a non-error value", { cause: error }));
      },
    );
  });
}
