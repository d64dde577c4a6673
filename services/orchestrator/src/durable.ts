/**
 * A write that runs behind the work that does not need it, awaited only by whoever needs it durable.
 * `ensure()` starts it if it has not started, resolves once it has landed, tries again when the last attempt
 * failed, and throws (retryable: the store was unreachable) when this attempt fails too. The write must be
 * idempotent (an insert whose duplicate counts as done).
 */
export class Durable {
  readonly #write: (() => Promise<unknown>) | undefined;
  #attempt: Promise<boolean> | undefined;
  #timer: NodeJS.Timeout | undefined;

  private constructor(write: (() => Promise<unknown>) | undefined, delayMs: number | undefined) {
    this.#write = write;
    if (!write) this.#attempt = Promise.resolve(true);
    else if (delayMs === undefined) this.#attempt = Durable.#try(write);
    else {
      this.#timer = setTimeout(() => this.#start(), delayMs);
      this.#timer.unref();
    }
  }

  /** Starts `write` now. */
  static start(write: () => Promise<unknown>): Durable {
    return new Durable(write, undefined);
  }

  /**
   * Starts `write` after `delayMs`, or as soon as someone needs it (`ensure()`): a record that can wait for
   * the outcome it will sit next to is written with it, not while the call it describes is still running.
   */
  static later(write: () => Promise<unknown>, delayMs: number): Durable {
    return new Durable(write, delayMs);
  }

  /** Something already durable (read from the store, or written before). */
  static done(): Durable {
    return new Durable(undefined, undefined);
  }

  /** Waits for the write without throwing (starting it if it waits for its delay); true once it has landed. */
  settled(): Promise<boolean> {
    return this.#start();
  }

  /** Resolves once the write has landed; a failed attempt is retried here, and a second failure thrown. */
  async ensure(): Promise<void> {
    if (await this.#start()) return;
    // Retried on this caller's time, so the failure reaches the one who needs the write (a redelivery follows).
    await this.#write!();
    this.#attempt = Promise.resolve(true);
  }

  #start(): Promise<boolean> {
    clearTimeout(this.#timer);
    this.#attempt ??= Durable.#try(this.#write!);
    return this.#attempt;
  }

  static #try(write: () => Promise<unknown>): Promise<boolean> {
    return write().then(
      () => true,
      () => false,
    );
  }
}
