/**
 * What one span of work in a service looked like on the wall clock: a database command, a message handled
 * (`in`: delivered → handler done), a publish (`out`: sent → acknowledged) or a write to a JetStream ledger
 * (`js`: a claim, sent → acknowledged). Times are microseconds since the Unix epoch, so spans of different
 * processes on one machine can be laid side by side.
 */
export type TraceEntry = [kind: "db" | "in" | "out" | "js", name: string, startUs: number, endUs: number];

/** A copy of a process's counters, and the trace entries recorded since the last snapshot. */
export interface StatsSnapshot {
  counters: Record<string, number>;
  trace: TraceEntry[];
}

/** Microseconds since the Unix epoch, with sub-millisecond resolution. */
export function epochMicros(): number {
  return (performance.timeOrigin + performance.now()) * 1_000;
}

/**
 * Counters of what a service did (database commands by command and collection, publishes and deliveries by
 * event type) and, when given a capacity, a bounded trace of recent spans. Benchmarks read both to say where
 * a call's time goes; counting is a map increment, and a trace of capacity 0 records nothing.
 */
export class RuntimeStats {
  readonly #counters = new Map<string, number>();
  readonly #capacity: number;
  #trace: TraceEntry[] = [];
  #dropped = 0;

  constructor(options: { traceCapacity?: number } = {}) {
    this.#capacity = Math.max(0, Math.floor(options.traceCapacity ?? 0));
  }

  /** Whether spans are being recorded (callers may skip taking timestamps otherwise). */
  get tracing(): boolean {
    return this.#capacity > 0;
  }

  /** Adds `n` to counter `name`. */
  add(name: string, n = 1): void {
    this.#counters.set(name, (this.#counters.get(name) ?? 0) + n);
  }

  /** The counters so far, read without handing over the trace (what a metrics scrape reads). */
  counters(): ReadonlyMap<string, number> {
    return this.#counters;
  }

  /** Records one span; the oldest spans are dropped beyond the capacity. */
  record(kind: TraceEntry[0], name: string, startUs: number, endUs: number): void {
    if (this.#capacity === 0) return;
    if (this.#trace.length >= this.#capacity) {
      this.#trace.shift();
      this.#dropped += 1;
    }
    this.#trace.push([kind, name, startUs, endUs]);
  }

  /** The counters so far and the spans recorded since the previous snapshot (which are handed over, not kept). */
  snapshot(): StatsSnapshot {
    const trace = this.#trace;
    this.#trace = [];
    const counters = Object.fromEntries(this.#counters);
    if (this.#dropped > 0) counters["stats.trace_dropped"] = this.#dropped;
    return { counters, trace };
  }
}
