import type { ClaimLedger } from "@toolgate/bus";
import { idTime, sha256, type CallId, type RunId } from "@toolgate/contracts";
import type { Collection } from "mongodb";
import { z } from "zod";

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

/**
 * What claiming a provider call id found: this call's claim stands, an earlier one does (returned), or the id
 * is held by something that is not a claim (written by a peer on the bus): taken, by no call anyone can name.
 */
export type HostCallKeyClaim = { kind: "claimed" } | { kind: "existing"; key: HostCallKey } | { kind: "unreadable" };

/** The same provider call id was used in the run for another tool or other arguments. Maps to 422. */
export class HostCallConflictError extends Error {
  readonly code = "PROVIDER_CALL_ID_CONFLICT";
  constructor(
    readonly providerCallId: string,
    /** The call that holds the id; undefined when what holds it is not a call's claim. */
    readonly callId: CallId | undefined,
  ) {
    super(
      callId === undefined
        ? `provider call id ${JSON.stringify(providerCallId.slice(0, 64))} cannot be used in this run: it is already taken`
        : `provider call id ${JSON.stringify(providerCallId.slice(0, 64))} was already used in this run for call ${callId} with another tool or other arguments`,
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
 * How long after the ledger's creation a run may still have been minted by a release that kept its keys in the
 * database (a rolling upgrade: older replicas serve alongside newer ones for a while).
 */
const LEGACY_MARGIN_MS = 3_600_000;

const StoredKeySchema = z.object({
  _id: z.string(),
  run_id: z.string(),
  provider_call_id: z.string(),
  call_id: z.string(),
  tool_name: z.string(),
  signature: z.string(),
  created_at: z.coerce.date(),
});

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * Provider call ids claimed per run, first claim wins: two submissions of one provider call id, however
 * concurrent and on whichever replica, end up with one runtime call. A claim is a compare-and-set publish on a
 * JetStream ledger (subject `<run_id>.<sha256 of the provider id>`), not a database write: it is durable when
 * acknowledged, like the proposal that follows it, and costs a PubAck round trip. Keys claimed by releases that
 * kept them in the database (`legacy`) are honoured: a run minted before the ledger existed looks there first.
 */
export class HostCallKeys {
  readonly #ledger: ClaimLedger;
  readonly #legacy: Collection<HostCallKey> | undefined;
  /** Whether the database holds keys of an earlier release: looked at once, by the first claim. */
  #legacyHeld: Promise<boolean> | undefined;

  /** `legacy`: where earlier releases kept the keys; left out, or found empty, it is never read. */
  constructor(ledger: ClaimLedger, legacy?: Collection<HostCallKey>) {
    this.#ledger = ledger;
    this.#legacy = legacy;
  }

  /** Claims each key; for those claimed before, the earlier claim. Throws when the ledger is unreachable. */
  async claim(keys: readonly HostCallKey[]): Promise<HostCallKeyClaim[]> {
    const earlier = await this.#legacyKeys(keys);
    return Promise.all(
      keys.map(async (key): Promise<HostCallKeyClaim> => {
        const old = earlier.get(key._id);
        if (old) return { kind: "existing", key: old };
        const digest = key._id.slice(key.run_id.length + 1).replace(/^sha256:/, "");
        const outcome = await this.#ledger.claim([key.run_id, digest], encoder.encode(JSON.stringify(key)), `${key._id}:${key.call_id}`);
        if (outcome.kind === "claimed") return outcome;
        const stored = parseStoredKey(outcome.value);
        // Not a claim an orchestrator wrote (a peer on the bus published there): the id is taken all the same.
        return stored && stored._id === key._id ? { kind: "existing", key: stored } : { kind: "unreadable" };
      }),
    );
  }

  /** The keys of runs minted before the ledger existed that an earlier release stored in the database. */
  async #legacyKeys(keys: readonly HostCallKey[]): Promise<Map<string, HostCallKey>> {
    const legacy = this.#legacy;
    const horizon = this.#ledger.since.getTime() + LEGACY_MARGIN_MS;
    const old = legacy ? keys.filter((k) => (idTime(k.run_id) ?? 0) < horizon).map((k) => k._id) : [];
    if (!legacy || old.length === 0) return new Map();
    // A failed look is looked at again by the next claim: it says nothing about what the database holds.
    this.#legacyHeld ??= legacy.findOne({}, { projection: { _id: 1 } }).then(
      (found) => found !== null,
      (error: unknown) => {
        this.#legacyHeld = undefined;
        throw error;
      },
    );
    if (!(await this.#legacyHeld)) return new Map();
    return new Map((await legacy.find({ _id: { $in: old } }).toArray()).map((k) => [k._id, k]));
  }
}

function parseStoredKey(value: Uint8Array): HostCallKey | undefined {
  try {
    const parsed = StoredKeySchema.safeParse(JSON.parse(decoder.decode(value)));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}
