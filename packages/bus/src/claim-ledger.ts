import { DiscardPolicy, JetStreamApiCodes, JetStreamApiError, jetstream, jetstreamManager, RetentionPolicy, StorageType } from "@nats-io/jetstream";
import type { JetStreamClient, JetStreamManager } from "@nats-io/jetstream";
import { isSubjectSafe } from "@toolgate/contracts";
import { epochMicros, RuntimeStats } from "@toolgate/telemetry";
import { JS_REQUEST_TIMEOUT_MS, PublishError, publishAttempts, type NatsEventBus, type PublishAttempts } from "./nats-event-bus.js";

export interface ClaimLedgerOptions {
  /** The stream that holds the claims (created when missing, never rescaled). */
  stream: string;
  /** Subjects of the claims: `<subjectPrefix>.<key token>…`. */
  subjectPrefix: string;
  replicas: number;
  /** Largest value a claim may hold. */
  maxValueBytes: number;
  publishTimeoutMs?: number;
  stats?: RuntimeStats;
}

/** What claiming a key found: this claim stands, or another one did first (its value). */
export type LedgerClaim = { kind: "claimed" } | { kind: "existing"; value: Uint8Array; claimId: string | undefined };

/**
 * First-writer-wins records on a JetStream stream, one subject per key. A claim is a publish that expects its
 * subject to be empty (`Nats-Expected-Last-Subject-Sequence: 0`): of any number of claims of one key, from any
 * replica, at any time, exactly one is stored, and the others read it back. A claim is durable once
 * acknowledged, on the stream's replicas with the server's fsync, like the events it precedes, and costs one
 * PubAck round trip instead of a database write. A claim published again under its own `claimId` (a retry
 * whose first PubAck was lost) is recognised as this claim, within the duplicate window by JetStream and after
 * it by the id stored with the value.
 *
 * Claims are kept as long as the stream keeps messages: it has no age limit (the keys live as long as what they
 * name); removing the claims of a key space is a purge by subject.
 */
export class ClaimLedger {
  readonly #js: JetStreamClient;
  readonly #jsm: JetStreamManager;
  readonly #options: ClaimLedgerOptions;
  readonly #stats: RuntimeStats;
  readonly #attempts: PublishAttempts;
  /** When the stream was created: nothing claimed before then is here. */
  readonly since: Date;

  private constructor(js: JetStreamClient, jsm: JetStreamManager, options: ClaimLedgerOptions, since: Date) {
    this.#js = js;
    this.#jsm = jsm;
    this.#options = options;
    this.#stats = options.stats ?? new RuntimeStats();
    this.#attempts = publishAttempts(options.publishTimeoutMs ?? 5_000);
    this.since = since;
  }

  /**
   * Opens the ledger on the bus's connection, creating its stream when missing. Throws `StreamSettingsError`
   * when the stream exists with other replicas or storage than configured (unless the bus was told to allow it).
   */
  static async open(bus: NatsEventBus, options: ClaimLedgerOptions): Promise<ClaimLedger> {
    const jsm = await jetstreamManager(bus.connection);
    try {
      await jsm.streams.add({
        name: options.stream,
        subjects: [`${options.subjectPrefix}.>`],
        retention: RetentionPolicy.Limits,
        storage: StorageType.File,
        discard: DiscardPolicy.Old,
        num_replicas: options.replicas,
        max_msg_size: options.maxValueBytes + 1_024,
      });
    } catch (error) {
      // Another replica created it first, or it exists: the guard below says whether it is usable.
      if (!(error instanceof JetStreamApiError)) throw error;
    }
    await bus.checkStreamSettings(options.stream, options.replicas);
    const info = await jsm.streams.info(options.stream);
    return new ClaimLedger(jetstream(bus.connection, { timeout: JS_REQUEST_TIMEOUT_MS }), jsm, options, new Date(info.created));
  }

  /**
   * Claims `key` (subject-safe tokens) with `value`, under `claimId` (unique to this claim: a retry of it uses
   * the same). Throws a `PublishError` when the stream cannot be reached (nothing known: retry), a `RangeError`
   * when the value is too large.
   */
  async claim(key: readonly string[], value: Uint8Array, claimId: string): Promise<LedgerClaim> {
    if (key.length === 0 || !key.every(isSubjectSafe)) throw new TypeError(`claim key ${JSON.stringify(key)} is not made of subject-safe tokens`);
    if (value.byteLength > this.#options.maxValueBytes)
      throw new RangeError(`claim value of ${value.byteLength} bytes is above ${this.#options.maxValueBytes}`);
    const subject = `${this.#options.subjectPrefix}.${key.join(".")}`;
    const started = this.#stats.tracing ? epochMicros() : 0;
    this.#stats.add(`ledger.claim.${this.#options.stream}`);
    try {
      // A retried attempt whose first was stored is a duplicate of it (the same id), or refused as taken and then
      // read back as this claim: claimed either way.
      await this.#js.publish(subject, value, { msgID: claimId, expect: { lastSubjectSequence: 0 }, ...this.#attempts });
      return { kind: "claimed" };
    } catch (error) {
      // Whether it was stored is unknown (like an event's unacknowledged publish): the caller retries it as is.
      if (!(error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamWrongLastSequence))
        throw new PublishError(`claim of ${subject} was not acknowledged`, { cause: error });
    } finally {
      if (started > 0) this.#stats.record("js", `js.claim.${this.#options.stream}`, started, epochMicros());
    }
    const stored = await this.#jsm.streams.getMessage(this.#options.stream, { last_by_subj: subject }).catch((error: unknown) => {
      throw new PublishError(`claim of ${subject} is taken, and the claim that holds it could not be read`, { cause: error });
    });
    // Refused as taken, then gone: the stream was purged in between. Nothing is claimed; the caller may retry.
    if (!stored) throw new PublishError(`claim of ${subject} refused, but no claim is stored under it`);
    const storedId = stored.header?.get("Nats-Msg-Id") || undefined;
    if (storedId === claimId) return { kind: "claimed" };
    return { kind: "existing", value: stored.data, claimId: storedId };
  }
}
