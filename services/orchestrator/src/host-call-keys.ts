import { sha256, type CallId, type RunId } from "@toolgate/contracts";
import { InsertBatcher } from "@toolgate/storage";
import type { Collection } from "mongodb";

/**
 * A host's own call id, claimed once per run: the natural key of a host-driven call. `_id` is
 * `<run_id>:<sha256 of the provider call id>` (a provider id may hold any character and be 256 long).
 */
export interface HostCallKey {
  _id: string;
  run_id: RunId;
  provider_call_id: string;
  /** The runtime call the provider id stands for. */
  call_id: CallId;
  tool_name: string;
  /** Tool plus normalized arguments (the call's signature): what "the same call" means. */
  signature: string;
  created_at: Date;
}

/** What claiming a provider call id found: this call's claim stands, or an earlier one does (returned). */
export type HostCallKeyClaim = { kind: "claimed" } | { kind: "existing"; key: HostCallKey };

/** The same provider call id was used in the run for another tool or other arguments. Maps to 422. */
export class HostCallConflictError extends Error {
  readonly code = "PROVIDER_CALL_ID_CONFLICT";
  constructor(
    readonly providerCallId: string,
    readonly callId: CallId,
  ) {
    super(
      `provider call id ${JSON.stringify(providerCallId.slice(0, 64))} was already used in this run for call ${callId} with another tool or other arguments`,
    );
    this.name = "HostCallConflictError";
  }
}

/** The key document of one host call. */
export function hostCallKey(call: {
  _id: CallId;
  run_id: RunId;
  provider_call_id: string;
  tool_name: string;
  signature: string;
  created_at: Date;
}): HostCallKey {
  return {
    _id: `${call.run_id}:${sha256(call.provider_call_id)}`,
    run_id: call.run_id,
    provider_call_id: call.provider_call_id,
    call_id: call._id,
    tool_name: call.tool_name,
    signature: call.signature,
    created_at: call.created_at,
  };
}

/**
 * Provider call ids claimed per run by insert (first wins, on MongoDB and FerretDB alike): two submissions of
 * one provider call id, however concurrent, end up with one runtime call. Inserts of one moment go as one command.
 */
export class HostCallKeys {
  readonly #keys: Collection<HostCallKey>;
  readonly #inserts: InsertBatcher<HostCallKey>;

  constructor(keys: Collection<HostCallKey>) {
    this.#keys = keys;
    this.#inserts = new InsertBatcher(keys);
  }

  /** Claims each key; for those claimed before, the earlier claim. Throws when the store is unreachable. */
  async claim(keys: readonly HostCallKey[]): Promise<HostCallKeyClaim[]> {
    const outcomes = await Promise.all(keys.map((k) => this.#inserts.insert(k)));
    const taken = keys.filter((_, i) => outcomes[i] === "duplicate").map((k) => k._id);
    const earlier =
      taken.length === 0 ? new Map<string, HostCallKey>() : new Map((await this.#keys.find({ _id: { $in: taken } }).toArray()).map((k) => [k._id, k]));
    return keys.map((k, i) => {
      if (outcomes[i] === "inserted") return { kind: "claimed" };
      const first = earlier.get(k._id);
      // A duplicate is never deleted (keys live as long as their run), so the earlier claim is there to read.
      if (!first) throw new Error(`host call key ${k._id} reported as a duplicate but not found`);
      return { kind: "existing", key: first };
    });
  }
}
