import type { ErrorCode, Principal, RunContext, RunStopReason, ToolRef } from "@toolgate/contracts";
import { DUPLICATE_KEY } from "@toolgate/storage";
import type { Collection, Db } from "mongodb";

/** The approval of call `callId`: one approval per call, so a redelivered proposal finds its request again. */
export function approvalIdFor(callId: string): string {
  return `apr_${callId.startsWith("call_") ? callId.slice(5) : callId}`;
}

/**
 * A stored approval request, written once by policy when a call needs a human. Everything needed to show the
 * request to an approver and, once approved, to issue the signed authorization is here.
 */
export interface ApprovalRequestRecord {
  /** The approval id ({@link approvalIdFor}). */
  _id: string;
  call_id: string;
  run_id: string;
  tenant: string;
  /** The authenticated principal that made the call (never the model). */
  requester: Principal;
  tool: ToolRef;
  risk: string;
  side_effect: string;
  /** The normalized arguments as RFC 8785 text: tool arguments may hold keys a document field cannot. */
  arguments_json: string;
  args_hash: string;
  plan_hash: string;
  context: RunContext;
  taint: { tainted: boolean; sources: string[] };
  /** Why approval is required, and under which policy version. */
  reasons: string[];
  policy_version: string;
  /** Sequence number of the `approval_requested` event: the events that follow continue from it. */
  event_seq: number;
  requested_at: Date;
  expires_at: Date;
  /**
   * A hint for listing and sweeping (`closed` once decided; the decision record is the truth), kept in a field
   * the store indexes for equality: the sweeps ask for the open requests every second, never scan the rest.
   */
  status: "open" | "closed";
}

/**
 * `revoked`: an approver approved, but the policy in force by then no longer allows the call (it ends with
 * PERMISSION_DENIED; the approval is never usable). `withdrawn`: the call's run stopped (`run_stop` says why) or
 * its caller cancelled the call while the request waited, so nobody can approve it any more.
 */
export type ApprovalOutcome = "approved" | "denied" | "expired" | "revoked" | "withdrawn";

/**
 * The one decision on a request: inserted on the approval id, so the first of an approver's approve, another's
 * deny and the expiry sweeper wins, on every replica — a unique insert is the only compare-and-set used.
 */
export interface ApprovalDecisionRecord {
  _id: string;
  call_id: string;
  outcome: ApprovalOutcome;
  /** The human who approved or denied (absent for an expiry). */
  approver?: Principal;
  /** The approver's note, for the audit trail only. */
  note?: string;
  /** `revoked`: why the policy in force at approval time denies the call, and its version; `withdrawn`: why. */
  reasons?: string[];
  policy_version?: string;
  /** `withdrawn`: the stop reason of the run (e.g. `approval_timeout`); absent when the caller cancelled the call. */
  run_stop?: RunStopReason;
  decided_at: Date;
  /** Approved: the authorization it produced may be used until then (short-lived). */
  grant_expires_at?: Date;
  /** When its events were published; absent until then (any replica republishes, event ids deduplicate). */
  published_at?: Date;
  /** Whether its events were published, in a field the store indexes for equality (what the sweeps ask for). */
  status: "unpublished" | "published";
}

/** Why the executor refuses an approval. */
export type ApprovalFailureCode = Extract<ErrorCode, "APPROVAL_REQUIRED" | "APPROVAL_DENIED" | "APPROVAL_EXPIRED" | "APPROVAL_MISMATCH" | "APPROVAL_CONSUMED">;

/**
 * The first presentation of an approval to an executor, inserted on the approval id: it consumes the approval
 * whatever its outcome (a presentation that fails verification burns the approval: fail closed). A redelivery
 * of the same presentation (same stream message) reads the same outcome back.
 */
export interface ApprovalConsumptionRecord {
  _id: string;
  call_id: string;
  /** Identity of the presentation, e.g. `stream:<sequence>` of the authorized message. */
  presentation: string;
  outcome: "ok" | ApprovalFailureCode;
  consumer: string;
  at: Date;
}

const isDuplicate = (error: unknown): boolean => (error as { code?: unknown }).code === DUPLICATE_KEY;

/**
 * Approval requests, decisions and consumptions in MongoDB (or FerretDB). Every transition that must happen at
 * most once is an insert on a unique `_id`; later writes are single-writer hints (`status`, `published_at`).
 */
export class MongoApprovalStore {
  readonly requests: Collection<ApprovalRequestRecord>;
  readonly decisions: Collection<ApprovalDecisionRecord>;
  readonly consumptions: Collection<ApprovalConsumptionRecord>;

  constructor(db: Db) {
    this.requests = db.collection<ApprovalRequestRecord>("approval_requests");
    this.decisions = db.collection<ApprovalDecisionRecord>("approval_decisions");
    this.consumptions = db.collection<ApprovalConsumptionRecord>("approval_consumptions");
  }

  /** Creates the indexes that listing and sweeping use (policy's job; the executor reads by `_id` only). */
  async ensureIndexes(): Promise<void> {
    await Promise.all([
      this.requests.createIndex({ status: 1, tenant: 1, expires_at: 1 }, { name: "status_tenant_expiry" }),
      this.decisions.createIndex({ status: 1, decided_at: 1 }, { name: "status_decided" }),
    ]);
    // Records of versions before `status` was kept: read once here, never by the sweeps.
    await Promise.all([
      this.requests.updateMany({ open: true }, { $set: { status: "open" }, $unset: { open: "" } } as never),
      this.requests.updateMany({ open: false }, { $set: { status: "closed" }, $unset: { open: "" } } as never),
      this.decisions.updateMany({ status: { $exists: false }, published_at: { $exists: true } }, { $set: { status: "published" } }),
      this.decisions.updateMany({ status: { $exists: false } }, { $set: { status: "unpublished" } }),
    ]);
  }

  /** Stores a request; when one exists for this approval id (a redelivered proposal) returns that one instead. */
  async request(record: ApprovalRequestRecord): Promise<{ created: boolean; record: ApprovalRequestRecord }> {
    try {
      await this.requests.insertOne(record);
      return { created: true, record };
    } catch (error) {
      if (!isDuplicate(error)) throw error;
      const existing = await this.requests.findOne({ _id: record._id });
      if (!existing) throw new Error(`approval request ${record._id} vanished after a duplicate-key error`, { cause: error });
      return { created: false, record: existing };
    }
  }

  getRequest(id: string): Promise<ApprovalRequestRecord | null> {
    return this.requests.findOne({ _id: id });
  }

  getDecision(id: string): Promise<ApprovalDecisionRecord | null> {
    return this.decisions.findOne({ _id: id });
  }

  getConsumption(id: string): Promise<ApprovalConsumptionRecord | null> {
    return this.consumptions.findOne({ _id: id });
  }

  /** Records the decision (its events not yet published) unless one exists; returns the decision that stands. */
  async decide(decision: Omit<ApprovalDecisionRecord, "status">): Promise<{ won: boolean; decision: ApprovalDecisionRecord }> {
    const record: ApprovalDecisionRecord = { ...decision, status: "unpublished" };
    try {
      await this.decisions.insertOne(record);
    } catch (error) {
      if (!isDuplicate(error)) throw error;
      const existing = await this.decisions.findOne({ _id: record._id });
      if (!existing) throw new Error(`approval decision ${record._id} vanished after a duplicate-key error`, { cause: error });
      await this.close(record._id);
      return { won: false, decision: existing };
    }
    await this.close(record._id);
    return { won: true, decision: record };
  }

  /** Marks a request as no longer open (a listing hint; idempotent). */
  async close(id: string): Promise<void> {
    await this.requests.updateOne({ _id: id }, { $set: { status: "closed" } });
  }

  /** Marks a decision's events as published (idempotent). */
  async markPublished(id: string, at: Date): Promise<void> {
    await this.decisions.updateOne({ _id: id }, { $set: { published_at: at, status: "published" } });
  }

  /**
   * Requests still marked open, optionally of one tenant, call or run, oldest expiry first. Only equality is
   * asked of the store (an index lookup of the open requests, on MongoDB and FerretDB alike); the expiry and the
   * order are applied to that small set here.
   */
  async openRequests(filter: { tenant?: string; expiredBy?: Date; callId?: string; runId?: string }, limit: number): Promise<ApprovalRequestRecord[]> {
    const open = await this.requests
      .find({
        status: "open",
        ...(filter.tenant === undefined ? {} : { tenant: filter.tenant }),
        ...(filter.callId === undefined ? {} : { call_id: filter.callId }),
        ...(filter.runId === undefined ? {} : { run_id: filter.runId }),
      })
      .toArray();
    return open
      .filter((r) => filter.expiredBy === undefined || r.expires_at <= filter.expiredBy)
      .sort((a, b) => a.expires_at.getTime() - b.expires_at.getTime() || a._id.localeCompare(b._id))
      .slice(0, limit);
  }

  /** Decisions whose events were not (yet) published, decided before `before` (an index lookup, as above). */
  async unpublishedDecisions(before: Date, limit: number): Promise<ApprovalDecisionRecord[]> {
    return (await this.decisions.find({ status: "unpublished" }).toArray()).filter((d) => d.decided_at <= before).slice(0, limit);
  }

  /** Decisions of these approvals, by id. */
  async decisionsOf(ids: readonly string[]): Promise<Map<string, ApprovalDecisionRecord>> {
    if (ids.length === 0) return new Map();
    const found = await this.decisions.find({ _id: { $in: [...ids] } }).toArray();
    return new Map(found.map((d) => [d._id, d]));
  }

  /** Inserts the first presentation of an approval; returns the one that stands. */
  async consume(record: ApprovalConsumptionRecord): Promise<{ first: boolean; consumption: ApprovalConsumptionRecord }> {
    try {
      await this.consumptions.insertOne(record);
      return { first: true, consumption: record };
    } catch (error) {
      if (!isDuplicate(error)) throw error;
      const existing = await this.consumptions.findOne({ _id: record._id });
      if (!existing) throw new Error(`approval consumption ${record._id} vanished after a duplicate-key error`, { cause: error });
      return { first: false, consumption: existing };
    }
  }

  /** Deletes requests, decisions and consumptions older than `before` (explicit retention: no TTL indexes). */
  async purge(before: Date): Promise<number> {
    const [requests, decisions, consumptions] = await Promise.all([
      this.requests.deleteMany({ expires_at: { $lt: before }, status: "closed" }),
      this.decisions.deleteMany({ decided_at: { $lt: before }, status: "published" }),
      this.consumptions.deleteMany({ at: { $lt: before } }),
    ]);
    return requests.deletedCount + decisions.deletedCount + consumptions.deletedCount;
  }
}
