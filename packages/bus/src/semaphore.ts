/** Counting semaphore bounding how many handlers run at once in one process. */
export class Semaphore {
  #available: number;
  readonly #permits: number;
  readonly #waiting: (() => void)[] = [];

  constructor(permits: number) {
    if (!Number.isInteger(permits) || permits < 1) throw new RangeError(`permits must be a positive integer, got ${permits}`);
    this.#available = permits;
    this.#permits = permits;
  }

  /** Resolves once a permit is held; permits are granted in request order. */
  acquire(): Promise<void> {
    if (this.#available > 0) {
      this.#available -= 1;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.#waiting.push(resolve));
  }

  /** Returns a permit, handing it straight to the oldest waiter if there is one. Throws if no permit is held. */
  release(): void {
    // A release without an acquire would silently raise the limit.
    if (this.#available >= this.#permits) throw new Error("Semaphore.release() without a held permit");
    const next = this.#waiting.shift();
    if (next) next();
    else this.#available += 1;
  }
}
