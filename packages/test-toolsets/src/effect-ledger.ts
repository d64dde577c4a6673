import { randomUUID } from "node:crypto";
import type { JsonValue } from "@toolgate/contracts";
import { InsertBatcher } from "@toolgate/storage";
import type { Collection, Db } from "mongodb";

/** One real side effect, as the tool itself recorded it. */
export interface EffectRecord {
  _id: string;
  tool: string;
  idempotency_key: string;
  call_id: string;
  executor: string;
  at: Date;
  /** What the tool answered for this effect, as JSON text (tool data may hold keys a document cannot). */
  data_json?: string;
}

/**
 * Counts side effects independently of the runtime's own bookkeeping: every execution of a ledger-backed
 * tool inserts one record, so tests and benchmarks can prove "no key has two effects".
 */
export class EffectLedger {
  readonly #effects: Collection<EffectRecord>;
  readonly #inserts: InsertBatcher<EffectRecord>;
  readonly #executor: string;

  constructor(db: Db, executor: string, collection = "effects") {
    this.#effects = db.collection<EffectRecord>(collection);
    this.#inserts = new InsertBatcher(this.#effects);
    this.#executor = executor;
  }

  /** Records one effect (and what the tool answered for it); resolves with its id once it is durable. */
  async record(tool: string, idempotencyKey: string, callId: string, data?: JsonValue): Promise<string> {
    const id = randomUUID();
    await this.#inserts.insert({
      _id: id,
      tool,
      idempotency_key: idempotencyKey,
      call_id: callId,
      executor: this.#executor,
      at: new Date(),
      ...(data === undefined ? {} : { data_json: JSON.stringify(data) }),
    });
    return id;
  }

  /** The first effect recorded under `idempotencyKey`, if any: what a status check reports. */
  async find(idempotencyKey: string): Promise<{ id: string; data: JsonValue | undefined } | undefined> {
    const found = await this.#effects.findOne({ idempotency_key: idempotencyKey }, { sort: { at: 1 } });
    if (!found) return undefined;
    return { id: found._id, data: found.data_json === undefined ? undefined : (JSON.parse(found.data_json) as JsonValue) };
  }
}

/** Keys with more than one recorded effect, and the total number of effects, in one ledger collection. */
export async function duplicateEffects(db: Db, collection = "effects"): Promise<{ total: number; duplicates: { key: string; count: number }[] }> {
  const counts = new Map<string, number>();
  let total = 0;
  for await (const e of db.collection<EffectRecord>(collection).find({}, { projection: { idempotency_key: 1 } })) {
    total += 1;
    counts.set(e.idempotency_key, (counts.get(e.idempotency_key) ?? 0) + 1);
  }
  const duplicates = [...counts].filter(([, n]) => n > 1).map(([key, count]) => ({ key, count }));
  return { total, duplicates };
}
