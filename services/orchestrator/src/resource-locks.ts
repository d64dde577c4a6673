import { InsertBatcher } from "@toolgate/storage";
import type { Collection, Db } from "mongodb";

/**
 * One step in the life of a resource's lock: generation `n` acquired by a call (`held`), or generation `n`
 * released (`released`). Steps are only ever inserted, so every transition is an atomic unique insert —
 * on MongoDB and on FerretDB, whose conditional updates and deletes are not atomic.
 */
interface LockStep {
  /** `<resource>#<n>` when held, `<resource>#<n>:released` when released. */
  _id: string;
  resource: string;
  n: number;
  state: "held" | "released";
  holder: string;
  at: Date;
}

/**
 * Mutual exclusion on resources (e.g. `task:task_c04`) across runs and orchestrator replicas, so that two
 * calls that write to the same resource never overlap. A lock is released when its call's outcome is
 * attached, which always happens eventually (every call ends), so locks need no expiry.
 */
export class ResourceLocks {
  readonly #steps: Collection<LockStep>;
  readonly #inserts: InsertBatcher<LockStep>;
  /** Highest generation this process has seen per resource: probing starts there. */
  readonly #known = new Map<string, number>();

  constructor(db: Db, collection = "resource_locks") {
    this.#steps = db.collection<LockStep>(collection);
    this.#inserts = new InsertBatcher(this.#steps);
  }

  /**
   * Acquires every lock in `resources` for `holder`, all or none (in sorted order, so two callers never
   * deadlock). Returns true when `holder` holds them all now (also when it already did).
   */
  async acquire(resources: readonly string[], holder: string): Promise<boolean> {
    const held: string[] = [];
    for (const resource of [...resources].sort()) {
      if (await this.#acquireOne(resource, holder)) held.push(resource);
      else {
        await this.release(held, holder);
        return false;
      }
    }
    return true;
  }

  /** Releases the locks `holder` holds on `resources`; idempotent. */
  async release(resources: readonly string[], holder: string): Promise<void> {
    for (const resource of resources) {
      const current = await this.#current(resource);
      if (current && current.state === "held" && current.holder === holder) {
        await this.#inserts.insert({ _id: `${resource}#${current.n}:released`, resource, n: current.n, state: "released", holder, at: new Date() });
      }
    }
  }

  /** Who holds `resource` now, if anyone. */
  async holder(resource: string): Promise<string | undefined> {
    const current = await this.#current(resource);
    return current?.state === "held" ? current.holder : undefined;
  }

  async #acquireOne(resource: string, holder: string): Promise<boolean> {
    for (let round = 0; round < 8; round++) {
      const current = await this.#current(resource);
      if (current?.state === "held") return current.holder === holder;
      const n = (current?.n ?? 0) + 1;
      const inserted = await this.#inserts.insert({ _id: `${resource}#${n}`, resource, n, state: "held", holder, at: new Date() });
      if (inserted === "inserted") {
        this.#known.set(resource, n);
        return true;
      }
      // Another caller took generation n first: look again.
    }
    return false;
  }

  /** The latest step of a resource's lock: probe forward from the highest generation known here. */
  async #current(resource: string): Promise<{ n: number; state: "held" | "released"; holder: string } | undefined> {
    let n = this.#known.get(resource) ?? 1;
    let latest: { n: number; state: "held" | "released"; holder: string } | undefined;
    for (;;) {
      const held = await this.#steps.findOne({ _id: `${resource}#${n}` });
      if (!held) break;
      latest = { n, state: "held", holder: held.holder };
      const released = await this.#steps.findOne({ _id: `${resource}#${n}:released` });
      if (!released) break;
      latest = { n, state: "released", holder: held.holder };
      n += 1;
    }
    if (latest) this.#known.set(resource, latest.n);
    return latest;
  }
}
