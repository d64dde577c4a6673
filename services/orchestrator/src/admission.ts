/**
 * Bounds the work the front doors start at once: a request that would create work (claim an idempotency key,
 * submit calls, start a run) enters, and leaves when that work has settled — which may be long after the request
 * was answered 503 at its deadline, since the work goes on. Beyond the limit a request is refused at once,
 * before it touches the store: after an outage every client retries, and without a bound each retry adds its
 * claims and reads to a store that is still catching up, so the backlog feeds itself instead of draining.
 */
/** The longest one piece of work keeps its place (see {@link AdmissionTicket.hold}). */
export const MAX_HOLD_MS = 30_000;

/** A request waiting in line: called once with its ticket, unless it stopped waiting (and left the line) first. */
type Waiter = (ticket: AdmissionTicket) => void;

export class Admission {
  readonly #limit: number;
  readonly #maxWaiting: number;
  #inFlight = 0;
  /** First come, first served: a place given back goes to the request that has waited longest. */
  readonly #line: Waiter[] = [];

  /** `maxWaiting`: requests that may wait in line for a place at once (default four times the limit). */
  constructor(limit: number, options: { maxWaiting?: number } = {}) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`admission limit must be a positive integer, got ${limit}`);
    this.#limit = limit;
    this.#maxWaiting = options.maxWaiting ?? 4 * limit;
  }

  /** Work in progress now. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** Requests waiting in line now. */
  get waiting(): number {
    return this.#line.length;
  }

  /** Enters when there is room and nobody is waiting; undefined otherwise (the request must wait or be refused). */
  enter(): AdmissionTicket | undefined {
    if (this.#inFlight >= this.#limit || this.#line.length > 0) return undefined;
    this.#inFlight += 1;
    return this.#ticket();
  }

  /**
   * Enters now when there is room, else waits in line for up to `waitMs`: places given back go to the longest
   * waiting request. Undefined when the line is full or the wait ran out. After an outage every client retries
   * at once; refused at random, the unlucky ones would retry again and again while newer ones got in, and each
   * refusal costs a parse, an authentication and an answer. In line, requests get in in the order they came.
   */
  async admit(waitMs: number): Promise<AdmissionTicket | undefined> {
    const now = this.enter();
    if (now || this.#line.length >= this.#maxWaiting || waitMs <= 0) return now;
    return new Promise((resolve) => {
      const waiter: Waiter = (ticket) => {
        clearTimeout(timer);
        resolve(ticket);
      };
      const timer = setTimeout(() => {
        this.#line.splice(this.#line.indexOf(waiter), 1);
        resolve(undefined);
      }, waitMs);
      this.#line.push(waiter);
    });
  }

  #ticket(): AdmissionTicket {
    return new AdmissionTicket(() => this.#giveBack());
  }

  /** A place given back: to the head of the line if anyone waits (the count stays), else free. */
  #giveBack(): void {
    const next = this.#line.shift();
    if (next) next(this.#ticket());
    else this.#inFlight -= 1;
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
