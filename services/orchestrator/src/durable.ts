/**
 * A write that runs behind the work that does not need it: started at once, awaited only by whoever needs it
 * durable. `ensure()` resolves once the write has landed, trying again when the last attempt failed, and
 * throws (retryable: the store was unreachable) when this attempt fails too. The write must be idempotent
 * (an insert whose duplicate counts as done).
 */
export class Durable {
  readonly #write: (() => Promise<unknown>) | undefined;
  #attempt: Promise<boolean>;

  private constructor(write: (() => Promise<unknown>) | undefined) {
    this.#write = write;
    this.#attempt = write ? Durable.#try(write) : Promise.resolve(true);
  }

  /** Starts `write` now. */
  static start(write: () => Promise<unknown>): Durable {
    return new Durable(write);
  }

  /** Something already durable (read from the store, or written before). */
  static done(): Durable {
    return new Durable(undefined);
  }

  /** Waits for the attempt in progress without throwing; true when the write has landed. */
  settled(): Promise<boolean> {
    return this.#attempt;
  }

  /** Resolves once the write has landed; a failed attempt is retried here, and a second failure thrown. */
  async ensure(): Promise<void> {
    if (await this.#attempt) return;
    // Retried on this caller's time, so the failure reaches the one who needs the write (a redelivery follows).
    await this.#write!();
    this.#attempt = Promise.resolve(true);
  }

  static #try(write: () => Promise<unknown>): Promise<boolean> {
    return write().then(
      () => true,
      () => false,
    );
  }
}
