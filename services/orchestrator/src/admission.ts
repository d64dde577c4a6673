/**
 * Bounds the work the front doors start at once: a request that would create work (claim an idempotency key,
 * submit calls, start a run) enters, and leaves when that work has settled — which may be long after the request
 * was answered 503 at its deadline, since the work goes on. Beyond the limit a request is refused at once,
 * before it touches the store: after an outage every client retries, and without a bound each retry adds its
 * claims and reads to a store that is still catching up, so the backlog feeds itself instead of draining.
 */
/** The longest one piece of work keeps its place (see {@link AdmissionTicket.hold}). */
export const MAX_HOLD_MS = 30_000;

export class Admission {
  readonly #limit: number;
  #inFlight = 0;

  constructor(limit: number) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`admission limit must be a positive integer, got ${limit}`);
    this.#limit = limit;
  }

  /** Work in progress now. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** Enters when there is room; undefined when the limit is reached and the request must be refused. */
  enter(): AdmissionTicket | undefined {
    if (this.#inFlight >= this.#limit) return undefined;
    this.#inFlight += 1;
    return new AdmissionTicket(() => (this.#inFlight -= 1));
  }
}

/**
 * One admitted request's place. It is given back once the request has stopped starting work ({@link release}:
 * when it is answered, or before it only waits) and every piece of work it started ({@link hold}) has settled —
 * a claim or a submission that outlives the 503 answered at its deadline keeps the place until it ends.
 */
export class AdmissionTicket {
  readonly #leave: () => void;
  #holding = 0;
  #released = false;
  #left = false;

  constructor(leave: () => void) {
    this.#leave = leave;
  }

  /**
   * Keeps the place until `work` settles, whatever happens to the request meanwhile — or for `limitMs` at most:
   * work that hangs (a store that never answers) must not keep new work out for good.
   */
  hold(work: Promise<unknown>, limitMs = MAX_HOLD_MS): void {
    this.#holding += 1;
    let counted = true;
    const settled = () => {
      if (!counted) return;
      counted = false;
      clearTimeout(timer);
      this.#holding -= 1;
      this.#giveBackIfDone();
    };
    const timer = setTimeout(settled, limitMs);
    timer.unref();
    work.then(settled, settled);
  }

  /** The request starts no more work (idempotent). */
  release(): void {
    this.#released = true;
    this.#giveBackIfDone();
  }

  #giveBackIfDone(): void {
    if (this.#left || !this.#released || this.#holding > 0) return;
    this.#left = true;
    this.#leave();
  }
}
