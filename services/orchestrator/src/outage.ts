import type { Logger } from "@toolgate/telemetry";
import { unreachableDependency } from "@toolgate/bus";
import type { Db } from "mongodb";

/** A dependency the API cannot work without. */
export type Dependency = "nats" | "mongo";

/**
 * A request could not be served because a dependency is unavailable (or did not answer within the API's
 * deadline). Retryable: the API answers 503 with `Retry-After`; with an Idempotency-Key a retry is safe.
 */
export class DependencyUnavailableError extends Error {
  readonly code = "UNAVAILABLE";
  constructor(
    readonly dependency: Dependency | "deadline",
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = "DependencyUnavailableError";
  }
}

/** What a failure says about the system: a dependency is unavailable (retry later), or anything else (a bug). */
export type FailureClass = { kind: "unavailable"; dependency: Dependency | "deadline" | "network"; reason: string } | { kind: "bug" };

/**
 * Classifies a failure: the API's own deadline, or a dependency the bus recognizes as unreachable (see
 * `unreachableDependency`), is `unavailable`; everything else is a programmer error. Never throws.
 */
export function classifyFailure(error: unknown): FailureClass {
  for (let current: unknown = error, depth = 0; depth < 8 && current instanceof Error; depth++, current = current.cause) {
    if (current instanceof DependencyUnavailableError) return { kind: "unavailable", dependency: current.dependency, reason: current.message };
  }
  const unreachable = unreachableDependency(error);
  return unreachable ? { kind: "unavailable", ...unreachable } : { kind: "bug" };
}

/** Resolves as `work` does, or rejects with {@link DependencyUnavailableError} after `ms` (the work goes on). */
export async function withDeadline<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      work,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new DependencyUnavailableError("deadline", `${what} did not finish within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** The parts of a NATS connection the monitor uses. */
export interface NatsStatusSource {
  status(): AsyncIterable<{ type: string }>;
  isClosed(): boolean;
  rtt(): Promise<number>;
}

export interface AvailabilityOptions {
  nats: NatsStatusSource;
  db: Db;
  logger: Logger;
  /** How often each dependency is probed (a NATS round trip, a database `ping`). */
  probeMs: number;
  /** A probe that takes longer than this counts as a failure. */
  probeTimeoutMs: number;
  /** Requests that may wait for a dependency at once (see {@link Availability.whenAvailable}); default 512. */
  maxWaiting?: number;
}

/**
 * Whether NATS and the database are reachable now: NATS's own disconnect/reconnect events, and a probe of each
 * every `probeMs` (a paused server sends no disconnect). Each transition is logged once. Used to refuse work at
 * once while a dependency is down, and by `/readyz`.
 */
export class Availability {
  readonly #options: AvailabilityOptions;
  readonly #down = new Map<Dependency, string>();
  readonly #timer: NodeJS.Timeout;
  /** Requests waiting for dependencies to come back: each checks on every recovery. */
  readonly #waiting = new Set<() => void>();
  #probing = false;
  #closed = false;

  constructor(options: AvailabilityOptions) {
    this.#options = options;
    void this.#watchNats();
    this.#timer = setInterval(() => void this.#probe(), options.probeMs);
    this.#timer.unref();
  }

  /** The dependencies unavailable now, with why. */
  unavailable(): { dependency: Dependency; reason: string }[] {
    return [...this.#down].map(([dependency, reason]) => ({ dependency, reason }));
  }

  /** Whether every dependency in `needed` is available. */
  available(needed: readonly Dependency[]): boolean {
    return needed.every((d) => !this.#down.has(d));
  }

  /**
   * Resolves true as soon as every dependency in `needed` is available (at once when they are), false after
   * `waitMs`, or at once when {@link AvailabilityOptions.maxWaiting} requests are waiting already. A request
   * that arrives near the end of an outage goes on when the dependency is back, instead of being refused and
   * retrying a `Retry-After` later: the backlog an outage leaves starts to drain the moment it ends.
   */
  async whenAvailable(needed: readonly Dependency[], waitMs: number): Promise<boolean> {
    if (this.available(needed)) return true;
    if (waitMs <= 0 || this.#closed || this.#waiting.size >= (this.#options.maxWaiting ?? 512)) return false;
    return new Promise<boolean>((resolve) => {
      const check = () => {
        if (!this.available(needed)) return;
        this.#waiting.delete(check);
        clearTimeout(timer);
        resolve(true);
      };
      const timer = setTimeout(() => {
        this.#waiting.delete(check);
        resolve(false);
      }, waitMs);
      this.#waiting.add(check);
    });
  }

  /** Requests waiting for a dependency now. */
  get waiting(): number {
    return this.#waiting.size;
  }

  /** Marks `dependency` down or up; logs the transition once. */
  mark(dependency: Dependency, down: string | undefined): void {
    const was = this.#down.get(dependency);
    if (down === undefined) {
      if (was === undefined) return;
      this.#down.delete(dependency);
      // At the outage's level: whoever saw it begin sees it end.
      this.#options.logger.warn({ dependency, was: was, waiting: this.#waiting.size }, "dependency available again");
      for (const check of [...this.#waiting]) check();
    } else {
      if (was !== undefined) return;
      this.#down.set(dependency, down);
      this.#options.logger.warn({ dependency, reason: down }, "dependency unavailable: refusing new work with 503");
    }
  }

  close(): void {
    this.#closed = true;
    clearInterval(this.#timer);
  }

  async #watchNats(): Promise<void> {
    try {
      for await (const s of this.#options.nats.status()) {
        if (this.#closed) return;
        if (s.type === "disconnect" || s.type === "close") this.mark("nats", s.type === "close" ? "connection closed" : "disconnected");
        else if (s.type === "reconnect") this.mark("nats", undefined);
      }
    } catch (error) {
      this.#options.logger.warn({ err: error }, "NATS status events ended; availability relies on probes");
    }
  }

  async #probe(): Promise<void> {
    if (this.#probing || this.#closed) return;
    this.#probing = true;
    const { nats, db, probeTimeoutMs } = this.#options;
    const probe = async (dependency: Dependency, check: () => Promise<unknown>): Promise<void> => {
      try {
        await withDeadline(check(), probeTimeoutMs, `${dependency} probe`);
        this.mark(dependency, undefined);
      } catch (error) {
        const failure = classifyFailure(error);
        this.mark(dependency, failure.kind === "unavailable" ? failure.reason : "probe failed");
      }
    };
    try {
      await Promise.all([
        probe("nats", async () => {
          if (nats.isClosed()) throw new DependencyUnavailableError("nats", "connection closed");
          await nats.rtt();
        }),
        probe("mongo", () => db.command({ ping: 1 })),
      ]);
    } finally {
      this.#probing = false;
    }
  }
}
