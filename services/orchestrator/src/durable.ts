/**
 * A write that runs behind the work that does not need it: started at once (or, for a lazy one, when it turns
 * out to be needed), awaited only by whoever needs it durable. `ensure()` resolves once the write has landed,
 * trying again when the last attempt failed, and throws (retryable: the store was unreachable) when this
 * attempt fails too. The write must be idempotent (an insert whose duplicate counts as done).
 */
export class Durable {
  readonly #write: (() => Promise<unknown>) | undefined;
  /** Undefined while a lazy write has not started. */
  #attempt: Promise<boolean> | undefined;
  #cancelled = false;

  private constructor(write: (() => Promise<unknown>) | undefined, now: boolean) {
    this.#write = write;
    this.#attempt = !write ? Promise.resolve(true) : now ? Durable.#try(write) : undefined;
  }

  /** Starts `write` now. */
  static start(write: () => Promise<unknown>): Durable {
    return new Durable(write, true);
  }

  /**
   * A write that may never be needed: it starts at the first {@link begin} or {@link ensure}, and never after
   * {@link cancel} took it back (what it would have stored is stored another way).
   */
  static lazy(write: () => Promise<unknown>): Durable {
    return new Durable(write, false);
  }

  /** Something already durable (read from the store, or written before). */
  static done(): Durable {
    return new Durable(undefined, false);
  }

  /** Starts a lazy write that has neither started nor been cancelled; does nothing otherwise. */
  begin(): void {
    if (this.#attempt || this.#cancelled) return;
    this.#attempt = Durable.#try(this.#write!);
  }

  /**
   * Takes back a lazy write that has not started: true when it never will, so the caller stores its content with
   * what it writes itself. False when the write has started (or is not lazy): it lands, or ensure() retries it.
   */
  cancel(): boolean {
    if (this.#attempt) return false;
    this.#cancelled = true;
    return true;
  }

  /** Waits for the attempt in progress without throwing; true when the write has landed (or was cancelled). */
  settled(): Promise<boolean> {
    return this.#attempt ?? Promise.resolve(this.#cancelled);
  }

  /**
   * Resolves once the write has landed, starting a lazy one now; a failed attempt is retried here, and a second
   * failure thrown. A cancelled write resolves at once: what it held is stored with what replaced it.
   */
  async ensure(): Promise<void> {
    this.begin();
    if (this.#cancelled || (await this.#attempt!)) return;
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
