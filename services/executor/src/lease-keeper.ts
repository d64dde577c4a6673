import type { IdempotencyStore } from "@toolgate/storage";
import type { Logger } from "@toolgate/telemetry";

interface Held {
  key: string;
  attempt: number;
  /** No renewal takes the lease past this (the tool's timeout plus the margin, from the claim). */
  deadline: number;
  renewedAt: number;
}

/**
 * Keeps the idempotency leases of the attempts this executor is running alive, so that a lease can be short: a
 * dead executor's attempt is taken over within one short lease, not after the tool's whole timeout plus margin,
 * while a live one's slow tool keeps its key. Every third of the lease, each attempt held for longer than that
 * is renewed — one timer for all of them; an attempt that ends sooner costs no write. A renewal never goes past
 * the attempt's deadline, so the longest a key can be held stays what the contract allows, and one that finds
 * the attempt fenced out (taken over) stops renewing it.
 */
export class LeaseKeeper {
  readonly #store: IdempotencyStore;
  readonly #owner: string;
  readonly #leaseMs: number;
  readonly #log: Logger;
  readonly #now: () => number;
  readonly #held = new Set<Held>();
  #timer: NodeJS.Timeout | undefined;

  constructor(deps: { store: IdempotencyStore; owner: string; leaseMs: number; logger: Logger; now?: () => number }) {
    this.#store = deps.store;
    this.#owner = deps.owner;
    this.#leaseMs = deps.leaseMs;
    this.#log = deps.logger;
    this.#now = deps.now ?? Date.now;
  }

  /** The lease a claim asks for: the short live lease, or the whole allowance when that is shorter. */
  leaseFor(maxLeaseMs: number): number {
    return Math.min(this.#leaseMs, maxLeaseMs);
  }

  /** Keeps `attempt`'s lease alive until the returned function is called (or its deadline passes). */
  hold(key: string, attempt: number, maxLeaseMs: number): () => void {
    const now = this.#now();
    const held: Held = { key, attempt, deadline: now + maxLeaseMs, renewedAt: now };
    this.#held.add(held);
    this.#timer ??= this.#start();
    return () => {
      this.#held.delete(held);
    };
  }

  #start(): NodeJS.Timeout {
    const every = Math.max(100, Math.floor(this.#leaseMs / 3));
    const timer = setInterval(() => {
      const now = this.#now();
      for (const held of this.#held) {
        // Half a period: a tick that comes a little early does not skip a renewal.
        if (now - held.renewedAt < every / 2) continue;
        const leaseMs = Math.min(this.#leaseMs, held.deadline - now);
        if (leaseMs <= 0) {
          this.#held.delete(held);
          continue;
        }
        held.renewedAt = now;
        this.#store.renew(held.key, this.#owner, held.attempt, leaseMs).then(
          (kept) => {
            if (!kept) this.#held.delete(held);
          },
          // The store is down: the lease may run out and another executor take the attempt over (a write is then
          // reconciled, never repeated); the next tick tries again.
          (error: unknown) => this.#log.warn({ err: error, attempt: held.attempt }, "could not renew an idempotency lease"),
        );
      }
    }, every);
    timer.unref();
    return timer;
  }

  /** Stops renewing anything (the process is stopping). */
  close(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
    this.#held.clear();
  }
}
