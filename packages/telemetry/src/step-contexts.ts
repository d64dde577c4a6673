import { context, ROOT_CONTEXT, type Context, type ContextManager } from "@opentelemetry/api";

/**
 * Carries the active context synchronously only: `with` makes a context active for the call it wraps and restores
 * the previous one when that call returns, so code after an `await` runs in whatever context resumed it (the root,
 * from the event loop). Node 20's `AsyncLocalStorage`, the alternative, runs a promise hook on every promise of the
 * process once it is enabled — the database driver's and the NATS client's included — which cost about as much of a
 * call's CPU as all of its spans. What a step does after an await finds the step by the call or run it works on
 * instead ({@link StepContexts}).
 */
export class SyncContextManager implements ContextManager {
  #active: Context = ROOT_CONTEXT;

  active(): Context {
    return this.#active;
  }

  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(ctx: Context, fn: F, thisArg?: ThisParameterType<F>, ...args: A): ReturnType<F> {
    const previous = this.#active;
    this.#active = ctx;
    try {
      return fn.call(thisArg, ...args);
    } finally {
      this.#active = previous;
    }
  }

  bind<T>(ctx: Context, target: T): T {
    if (typeof target !== "function") return target;
    const with_ = this.with.bind(this);
    const fn = target as (...args: unknown[]) => unknown;
    return function (this: unknown, ...args: unknown[]) {
      return with_(ctx, fn, this, ...args);
    } as T;
  }

  enable(): this {
    return this;
  }

  disable(): this {
    this.#active = ROOT_CONTEXT;
    return this;
  }
}

/** The step key of a call (`call`) or of a run's own work (`run`). */
export function stepKey(kind: "call" | "run", id: string): string {
  return `${kind}:${id}`;
}

/**
 * The context each call's or run's step is working in, by key ({@link stepKey}), while the step runs. A step
 * publishes after awaits (a database write first, say), where no context is active any more; what it publishes
 * about its own call or run is still its step's, found here. Nested or concurrent steps of one key stack: the
 * latest one entered is the one in force, until it leaves.
 */
export class StepContexts {
  readonly #byKey = new Map<string, Context[]>();

  /** The context of the step working on `key` now, if one is. */
  get(key: string): Context | undefined {
    const steps = this.#byKey.get(key);
    return steps?.[steps.length - 1];
  }

  /** Runs `fn` with `ctx` active, and as `key`'s step until the promise it returns settles. */
  run<T>(key: string, ctx: Context, fn: () => Promise<T>): Promise<T> {
    const leave = this.#enter(key, ctx);
    let running: Promise<T>;
    try {
      running = context.with(ctx, fn);
    } catch (error) {
      leave();
      throw error;
    }
    return running.finally(leave);
  }

  #enter(key: string, ctx: Context): () => void {
    let steps = this.#byKey.get(key);
    if (!steps) this.#byKey.set(key, (steps = []));
    steps.push(ctx);
    return () => {
      const at = steps.lastIndexOf(ctx);
      if (at >= 0) steps.splice(at, 1);
      if (steps.length === 0 && this.#byKey.get(key) === steps) this.#byKey.delete(key);
    };
  }
}

/** This process's steps (one registry, as there is one active context). */
export const stepContexts = new StepContexts();
