import { InsertBatcher } from "@toolgate/storage";
import type { Collection, Db } from "mongodb";

/** Whether a call fits its quota, or when to try again. */
export type QuotaOutcome = { ok: true } | { ok: false; retryAfterMs: number };

/** Counts calls per key in fixed time windows, shared by every policy replica. */
export interface QuotaCounter {
  /** Takes one of `limit` slots of the current window of `key`; throws when the store fails (retryable). */
  take(key: string, limit: number, windowMs: number, now: number): Promise<QuotaOutcome>;
}

interface QuotaSlot {
  /** `<key>|<window>|<slot>` */
  _id: string;
  key: string;
  window: number;
  window_end: Date;
  at: Date;
}

const MAX_HINTS = 10_000;

/**
 * Fixed-window counters made of slot documents: the n-th call of a window inserts slot n, so the unique `_id`
 * is the only compare-and-set (FerretDB's filtered updates are not atomic) and every replica sees the same
 * count. Slots fill densely from 0; each process remembers where it last found the first free slot.
 */
export class MongoQuotaCounter implements QuotaCounter {
  readonly #slots: Collection<QuotaSlot>;
  readonly #inserts: InsertBatcher<QuotaSlot>;
  readonly #next = new Map<string, number>();

  constructor(db: Db, collection = "policy_quota_slots") {
    this.#slots = db.collection<QuotaSlot>(collection);
    this.#inserts = new InsertBatcher(this.#slots);
  }

  async ensureIndexes(): Promise<void> {
    await this.#slots.createIndex({ key: 1, window: 1 }, { name: "key_window" });
    await this.#slots.createIndex({ window_end: 1 }, { name: "window_end" });
  }

  async take(key: string, limit: number, windowMs: number, now: number): Promise<QuotaOutcome> {
    const window = Math.floor(now / windowMs);
    const windowEnd = (window + 1) * windowMs;
    const hintKey = `${key}|${window}`;
    let slot = this.#next.get(hintKey) ?? (await this.#slots.countDocuments({ key, window }));
    while (slot < limit) {
      const outcome = await this.#inserts.insert({ _id: `${hintKey}|${slot}`, key, window, window_end: new Date(windowEnd), at: new Date(now) });
      slot += 1;
      if (this.#next.size >= MAX_HINTS) this.#next.clear();
      this.#next.set(hintKey, slot);
      if (outcome === "inserted") return { ok: true };
    }
    return { ok: false, retryAfterMs: Math.max(1, windowEnd - now) };
  }

  /** Deletes the slots of windows that ended before `before`. */
  async purge(before: Date): Promise<number> {
    return (await this.#slots.deleteMany({ window_end: { $lt: before } })).deletedCount;
  }
}
