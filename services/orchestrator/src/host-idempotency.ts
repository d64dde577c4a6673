import { canonicalHash, sha256, type Principal } from "@toolgate/contracts";
import type { RequestIdempotencyStore, RequestKeyRecord } from "@toolgate/storage";
import type { Counter, Logger } from "@toolgate/telemetry";
import { withDeadline } from "./outage.js";

/** The request header that carries a client's idempotency key (IETF draft "The Idempotency-Key HTTP Header Field"). */
export const IDEMPOTENCY_HEADER = "idempotency-key";
/** Where an MCP `tools/call` carries its idempotency key: `params._meta["toolgate/idempotency-key"]`. */
export const MCP_IDEMPOTENCY_META = "toolgate/idempotency-key";
export const MAX_IDEMPOTENCY_KEY_LENGTH = 255;

/** Visible ASCII without `"` and `\`: what a structured-field string holds without escapes. */
const KEY_PATTERN = /^[\x21\x23-\x5B\x5D-\x7E]+$/;

/** A key as read from a request: none (today's behaviour), a valid key, or why it was refused (400). */
export type ParsedIdempotencyKey = { ok: true; key: string | undefined } | { ok: false; message: string };

/**
 * Reads an idempotency key: a structured-field string (`"…"`) or the bare characters, 1 to 255 visible ASCII
 * characters other than `"` and `\`. A repeated header is refused. Never throws.
 */
export function parseIdempotencyKey(value: unknown): ParsedIdempotencyKey {
  if (value === undefined) return { ok: true, key: undefined };
  if (typeof value !== "string") return { ok: false, message: "send one Idempotency-Key, a string" };
  const key = value.length >= 2 && value.startsWith('"') && value.endsWith('"') ? value.slice(1, -1) : value;
  if (key.length === 0 || key.length > MAX_IDEMPOTENCY_KEY_LENGTH || !KEY_PATTERN.test(key)) {
    return { ok: false, message: `an Idempotency-Key is 1 to ${MAX_IDEMPOTENCY_KEY_LENGTH} visible ASCII characters other than '"' and '\\'` };
  }
  return { ok: true, key };
}

/** The scope of a principal's keys: two callers never share one (tenant and subject, unambiguously joined). */
export function principalScope(principal: Principal): string {
  return JSON.stringify([principal.tenant, principal.subject]);
}

/**
 * What "the same request" means for a key: the route (method, path with its parameters) and the canonical
 * body (RFC 8785), without `wait_ms` — how long a request waits for outcomes changes no work it creates.
 */
export function requestFingerprint(route: string, body: unknown): string {
  const rest =
    body !== null && typeof body === "object" && !Array.isArray(body) ? Object.fromEntries(Object.entries(body).filter(([k]) => k !== "wait_ms")) : body;
  return canonicalHash({ route, body: rest ?? null });
}

const joinKey = (scope: string, key: string): string => `${scope.length}:${scope}:${key}`;

/** A provider call id derived from a key, so that a retried MCP call is the same call of the same run. */
export function keyedProviderCallId(scope: string, key: string): string {
  return `mcp_${sha256(`${scope}\n${key}`).slice("sha256:".length, "sha256:".length + 32)}`;
}

/** What a request with a key should do. */
export type KeyDecision =
  /** Create the work: this request owns the key (`record.run_id` is the run to use when it makes one). */
  | { kind: "execute"; record: RequestKeyRecord; takenOver: boolean }
  /** The work exists: answer from it (the stored response, or the calls' current state). */
  | { kind: "replay"; record: RequestKeyRecord }
  /** The key was used for another request: 422. */
  | { kind: "mismatch"; record: RequestKeyRecord }
  /** The first request with the key is still creating its work: 409, retry after `retryAfterS`. */
  | { kind: "in_flight"; retryAfterS: number };

/** How an existing record answers a request with `fingerprint` at `now` (pure). */
export function decideExisting(record: RequestKeyRecord, fingerprint: string, now: number): "mismatch" | "replay" | "in_flight" | "take_over" {
  if (record.fingerprint !== fingerprint) return "mismatch";
  if (record.state === "done" || record.state === "submitted") return "replay";
  if (record.state === "claimed" && record.lease_until.getTime() > now) return "in_flight";
  return "take_over";
}

/** How many leases a claim is held for at most while its owner's work runs (see `HostIdempotency.hold`). */
export const MAX_HOLD_LEASES = 10;

/** Submissions this process made that retries are answered from without the store (the most recent ones). */
export const MAX_REMEMBERED_SUBMISSIONS = 10_000;

export interface HostIdempotencyOptions {
  store: RequestIdempotencyStore;
  /** This process, as the owner of its claims. */
  owner: string;
  /** How long a claim blocks other requests with its key before it can be taken over. */
  leaseMs: number;
  /** How long a key is kept (and answers retries) after its first use. */
  retentionMs: number;
  /** How often expired keys are purged. */
  purgeMs: number;
  /** How long a retry waits for this process's own submission of the same request (default 1.5 s). */
  joinWaitMs?: number;
  logger: Logger;
  now?: () => number;
  /** Counts each decision {@link HostIdempotency.begin} makes, by {@link keyDecisionLabel}. */
  decisions?: Counter<"decision">;
}

/** A key decision as a metric label: `claimed`, `taken_over`, `replay`, `mismatch` (422) or `in_flight` (409). */
export function keyDecisionLabel(decision: KeyDecision): string {
  if (decision.kind === "execute") return decision.takenOver ? "taken_over" : "claimed";
  return decision.kind;
}

/**
 * Host idempotency at the front doors: claims a principal's key for a request (or finds what an earlier
 * request with it left), records the work's ids and response, and purges keys after their retention.
 */
export class HostIdempotency {
  readonly #options: HostIdempotencyOptions;
  readonly #now: () => number;
  readonly #purge: NodeJS.Timeout;
  /** Submissions this process is making, by scope and key. */
  readonly #submitting = new Map<string, { record: RequestKeyRecord; work: Promise<{ runId: string; callIds: string[] }> }>();
  /** Submissions this process made, oldest first: what the store holds for them, kept until their retention ends. */
  readonly #submitted = new Map<string, RequestKeyRecord>();
  /** Releases and stored refusals of keys on their way to the store (see {@link #settle}). */
  readonly #settling = new Map<string, Promise<unknown>>();

  constructor(options: HostIdempotencyOptions) {
    this.#options = options;
    this.#now = options.now ?? Date.now;
    this.#purge = setInterval(() => {
      options.store
        .purgeExpired(new Date(this.#now()))
        .catch((error: unknown) => options.logger.warn({ err: error }, "idempotency key purge failed; retried later"));
    }, options.purgeMs);
    this.#purge.unref();
  }

  /**
   * Claims `key` for a request, or decides from the record an earlier request left. A stale claim (its owner
   * died or gave up) is taken over by one request. A retry of a submission this process is still making waits
   * for it instead (see {@link HostIdempotency.submitting}). Throws when the store is unreachable.
   */
  async begin(request: { scope: string; key: string; route: string; fingerprint: string; runId?: string }): Promise<KeyDecision> {
    const decision = await this.#begin(request);
    this.#options.decisions?.inc({ decision: keyDecisionLabel(decision) });
    return decision;
  }

  async #begin(request: { scope: string; key: string; route: string; fingerprint: string; runId?: string }): Promise<KeyDecision> {
    const { store, owner, leaseMs, retentionMs } = this.#options;
    const joined = await this.#join(request);
    if (joined) return joined;
    const claim = await store.claim({ ...request, owner, leaseMs, retentionMs });
    if (claim.kind === "claimed") return { kind: "execute", record: claim.record, takenOver: false };
    const record = claim.record;
    const decision = decideExisting(record, request.fingerprint, this.#now());
    if (decision === "mismatch" || decision === "replay") return { kind: decision, record };
    if (decision === "in_flight") return { kind: "in_flight", retryAfterS: Math.max(1, Math.ceil((record.lease_until.getTime() - this.#now()) / 1_000)) };
    const taken = await store.takeOver(record, owner, leaseMs);
    if (!taken) return { kind: "in_flight", retryAfterS: 1 };
    this.#options.logger.info({ previous_owner: record.owner, state: record.state }, "idempotency key taken over");
    return { kind: "execute", record: taken, takenOver: true };
  }

  /**
   * {@link begin}, answered within `deadlineMs` (or a `DependencyUnavailableError`: the request is answered 503).
   * A claim won after the deadline has no request left to create its work: it is released at once, so that the
   * client's retry takes the key over instead of being told 409 until the orphaned claim's lease runs out.
   */
  async beginWithin(
    request: { scope: string; key: string; route: string; fingerprint: string; runId?: string },
    deadlineMs: number,
    hold?: (work: Promise<unknown>) => void,
  ): Promise<KeyDecision> {
    const begun = this.begin(request);
    hold?.(begun);
    try {
      return await withDeadline(begun, deadlineMs, "claiming the idempotency key");
    } catch (error) {
      begun.then(
        (late) => {
          if (late.kind === "execute") this.fail(late.record);
        },
        () => undefined,
      );
      throw error;
    }
  }

  /**
   * Keeps the claim on `record` while `work` runs past half its lease (a slow store, an outage: the
   * request may have been answered 503 already), so that the client's retries are told 409 instead of taking
   * the key over and submitting the same work a second time — for at most {@link MAX_HOLD_LEASES} leases, after
   * which a hung owner's key can be taken over. A failed renewal is only logged: the lease then runs out.
   */
  hold(record: RequestKeyRecord, work: Promise<unknown>): void {
    const { store, leaseMs, logger } = this.#options;
    const until = this.#now() + MAX_HOLD_LEASES * leaseMs;
    const timer = setInterval(
      () => {
        if (this.#now() >= until) return clearInterval(timer);
        store.renew(record, new Date(this.#now() + leaseMs)).catch((error: unknown) => logger.warn({ err: error }, "idempotency key lease not renewed"));
      },
      Math.max(50, Math.floor(leaseMs / 2)),
    );
    timer.unref();
    const stop = () => clearInterval(timer);
    work.then(stop, stop);
  }

  /**
   * Marks `work` as the submission of `record`'s request in this process until it settles: a retry that
   * reaches this process meanwhile waits for it (up to `joinWaitMs`) and replays its ids, or is told it is
   * in flight — without a round trip to the store, where a retry storm after an outage would otherwise add
   * two commands per retry. A submission that fails lets the retry claim the key as usual.
   */
  submitting(record: RequestKeyRecord, work: Promise<{ runId: string; callIds: string[] }>): void {
    const id = joinKey(record.scope, record.key);
    const entry = { record, work };
    this.#submitting.set(id, entry);
    const forget = () => {
      if (this.#submitting.get(id) === entry) this.#submitting.delete(id);
    };
    work.then((ids) => {
      forget();
      this.#remember(id, { ...record, state: "submitted", run_id: ids.runId, call_ids: ids.callIds });
    }, forget);
  }

  /**
   * Keeps a submission's ids for the retries that reach this process later: after an outage every client retries
   * what it was not answered, and each retry answered here is two store commands fewer for a store that is still
   * catching up. A submitted key is never taken over, so the memory and the store say the same until the key's
   * retention ends.
   */
  #remember(id: string, record: RequestKeyRecord): void {
    this.#submitted.delete(id);
    this.#submitted.set(id, record);
    if (this.#submitted.size > MAX_REMEMBERED_SUBMISSIONS) this.#submitted.delete(this.#submitted.keys().next().value!);
  }

  async #join(request: { scope: string; key: string; fingerprint: string }): Promise<KeyDecision | undefined> {
    const id = joinKey(request.scope, request.key);
    const submitted = this.#submitted.get(id);
    if (submitted && submitted.expires_at.getTime() <= this.#now()) this.#submitted.delete(id);
    else if (submitted?.fingerprint === request.fingerprint) return { kind: "replay", record: submitted };
    const entry = this.#submitting.get(id);
    if (!entry || entry.record.fingerprint !== request.fingerprint) return undefined;
    let timer: NodeJS.Timeout | undefined;
    const waited = await Promise.race([
      entry.work.then(
        (ids) => ({ ids }),
        () => undefined,
      ),
      new Promise<"waiting">((resolve) => (timer = setTimeout(() => resolve("waiting"), this.#options.joinWaitMs ?? 1_500))),
    ]).finally(() => clearTimeout(timer));
    // The submission failed: its release (or its refusal, to replay) is on its way to the store. Read after it
    // lands, the key is free (or answered) — read before, it would still say in flight, and the retry wait again.
    if (waited === undefined) {
      await this.#settling.get(id);
      return undefined;
    }
    if (waited === "waiting") return { kind: "in_flight", retryAfterS: 1 };
    return { kind: "replay", record: { ...entry.record, state: "submitted", run_id: waited.ids.runId, call_ids: waited.ids.callIds } };
  }

  /** Records the work's ids behind the response; a failed write leaves the claim to be taken over later. */
  submitted(record: RequestKeyRecord, ids: { runId: string; callIds: string[] }): void {
    this.#options.store
      .submitted(record, ids)
      .catch((error: unknown) => this.#options.logger.warn({ err: error }, "idempotency key not marked submitted; a retry takes it over after its lease"));
  }

  /** Stores the response a retry replays. Throws when the store is unreachable. */
  complete(record: RequestKeyRecord, response: { status: number; body: unknown }, ids?: { runId: string; callIds: string[] }): Promise<void> {
    const stored = this.#options.store.complete(record, response, ids);
    this.#settle(record, stored);
    return stored;
  }

  /** Releases the key to the next request with it (the work was not created, or is not known to be). */
  fail(record: RequestKeyRecord): void {
    this.#settle(
      record,
      this.#options.store
        .fail(record)
        .catch((error: unknown) => this.#options.logger.warn({ err: error }, "idempotency key not released; a retry takes it over after its lease")),
    );
  }

  /** Remembers a write that settles `record`'s key until it lands, for the retries that joined its submission. */
  #settle(record: RequestKeyRecord, write: Promise<unknown>): void {
    const id = joinKey(record.scope, record.key);
    const landed = write.then(
      () => undefined,
      () => undefined,
    );
    this.#settling.set(id, landed);
    void landed.then(() => {
      if (this.#settling.get(id) === landed) this.#settling.delete(id);
    });
  }

  close(): void {
    clearInterval(this.#purge);
  }
}
