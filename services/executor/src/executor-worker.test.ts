import { generateKeyPairSync } from "node:crypto";
import type { ApprovalLedger } from "@toolgate/approvals";
import type { Delivery, EventBus, PublishReceipt } from "@toolgate/bus";
import {
  canonicalHash,
  decisionSigner,
  decisionVerifier,
  newCallId,
  newRunId,
  nextCallEvent,
  type CallEventOf,
  type JsonValue,
  success,
  type ResultEnvelope,
  type ToolgateEvent,
} from "@toolgate/contracts";
import { defineTool, ToolRegistry, type ToolContractInput, type ToolOutcome } from "@toolgate/registry";
import type { ClaimOutcome, ClaimRequest, IdempotencyStore } from "@toolgate/storage";
import { createLogger, RuntimeStats, ServiceMetrics } from "@toolgate/telemetry";
import type { Collection } from "mongodb";
import { describe, expect, it } from "vitest";
import { LeaseKeeper } from "./lease-keeper.js";
import { executorHandler, type DeadLetterRecord, type EvidenceRecord } from "./executor-worker.js";
import { executorMetrics, type ExecutorMetrics } from "./metrics.js";
import type { OperationTracker } from "./operations.js";
import { ToolInvoker } from "./tool-invoker.js";

// The executor's decisions with the bus, the store and the tool replaced by recording fakes: what runs, what
// is published, and what the delivery is told, for each way a claim can come out.

const write: ToolContractInput = {
  name: "create_ticket",
  version: "1.0.0",
  description: "Creates a ticket. Use when asked to file an issue; do not use to search tickets.",
  owner: "test",
  input_schema: { type: "object", properties: { title: { type: "string", maxLength: 64 } }, additionalProperties: false },
  output_schema: { type: "object", properties: { id: { type: "string" } }, required: ["id"], additionalProperties: false },
  side_effect: "write",
  risk: "low",
  timeout_ms: 1_000,
  retry: { max_attempts: 3, base_delay_ms: 10, max_delay_ms: 1_000 },
  idempotency: { kind: "keyed" },
  status_check: { tool: "ticket_status" },
};
const status: ToolContractInput = {
  ...write,
  name: "ticket_status",
  side_effect: "read",
  idempotency: { kind: "natural" },
  status_check: undefined,
  retry: undefined,
};

/** A read whose key is a business key: calls with the same title share it. */
const keyedRead: ToolContractInput = { ...status, name: "ticket_lookup", idempotency: { kind: "keyed", key_template: "{args:/title}" } };

const { privateKey, publicKey } = generateKeyPairSync("ed25519");
const signer = decisionSigner(privateKey.export({ type: "pkcs8", format: "pem" }).toString());
const verifier = decisionVerifier([publicKey.export({ type: "spki", format: "pem" }).toString()]);
const registry = ToolRegistry.from([write, status, keyedRead]);
const write_ = registry.get("create_ticket")!;
const read_ = registry.get("ticket_status")!;
const keyedRead_ = registry.get("ticket_lookup")!;
const principal = { tenant: "acme", subject: "alice", roles: ["r"] };

function authorized(
  args: Record<string, JsonValue> = { title: "disk full" },
  approval?: { approval_id: string; plan_hash: string },
  tool = write_,
): CallEventOf<"authorized"> {
  const callId = newCallId();
  const runId = newRunId();
  const decision = {
    ...(approval ? { approval } : {}),
    decision_id: "dec_1",
    call_id: callId,
    run_id: runId,
    tool: tool.ref,
    args_hash: canonicalHash(args),
    principal,
    context: {},
    policy_version: "p1",
    issued_at: new Date().toISOString(),
    expires_at: new Date(Date.now() + 60_000).toISOString(),
    key_id: signer.keyId,
  };
  return nextCallEvent(
    { call_id: callId, run_id: runId, principal, seq: 1 },
    "authorized",
    "policy",
    { decision, signature: signer.sign(decision), arguments: args },
    { tool: tool.ref, args_hash: decision.args_hash },
  );
}

function delivery(deliveryCount = 1): Delivery {
  return { subject: "s", streamSeq: 1, deliveryCount, maxDeliver: -1, working: () => undefined, signature: { header: undefined, digest: "" } };
}

/** A store whose claim answers are scripted and whose writes are recorded. */
class ScriptedStore implements IdempotencyStore {
  readonly claims: ClaimRequest[] = [];
  readonly completed: { attempt: number; result: ResultEnvelope }[] = [];
  readonly retries: { attempt: number; notBefore: Date }[] = [];
  /** Keys claimed already done (a read that ran before its claim). */
  readonly claimedDone: { request: ClaimRequest; result: ResultEnvelope }[] = [];
  constructor(
    private readonly answers: ClaimOutcome[],
    private readonly fenced = false,
    /** Whether every key exists already, so that none can be claimed done. */
    private readonly keysTaken = false,
    /** Resolves each claimDone: by default at once. */
    private readonly landing: () => Promise<void> = async () => undefined,
  ) {}
  async claimDone(request: ClaimRequest, result: ResultEnvelope): Promise<boolean> {
    await this.landing();
    if (this.keysTaken) return false;
    this.claimedDone.push({ request, result });
    return true;
  }
  async claim(request: ClaimRequest): Promise<ClaimOutcome> {
    this.claims.push(request);
    return this.answers.shift() ?? { kind: "busy", retryAfterMs: 10, owner: "other" };
  }
  async renew(): Promise<boolean> {
    return !this.fenced;
  }
  async complete(_key: string, _owner: string, attempt: number, result: ResultEnvelope): Promise<boolean> {
    if (this.fenced) return false;
    this.completed.push({ attempt, result });
    return true;
  }
  async scheduleRetry(_key: string, _owner: string, attempt: number, _result: ResultEnvelope, notBefore: Date): Promise<boolean> {
    if (this.fenced) return false;
    this.retries.push({ attempt, notBefore });
    return true;
  }
  async purgeCompleted(): Promise<number> {
    return 0;
  }
}

/** A publish the test controls: `store` records the event as acknowledged by the stream. */
type Publish = (event: ToolgateEvent, store: () => PublishReceipt) => Promise<PublishReceipt>;

function harness(
  store: IdempotencyStore,
  outcome: () => ToolOutcome,
  approvals: ApprovalLedger = {} as ApprovalLedger,
  publish?: Publish,
  metrics?: ExecutorMetrics,
) {
  const published: ToolgateEvent[] = [];
  let runs = 0;
  const bus = {
    publish: async (event: ToolgateEvent) => {
      const stored = (): PublishReceipt => {
        published.push(event);
        return { seq: published.length, duplicate: false };
      };
      return publish ? publish(event, stored) : stored();
    },
  } as unknown as EventBus;
  const runTicket = async (): Promise<ToolOutcome> => {
    runs += 1;
    return outcome();
  };
  const invoker = new ToolInvoker({
    inProcess: new Map([
      ["create_ticket", defineTool(write, runTicket)],
      ["ticket_status", defineTool(status, runTicket)],
      ["ticket_lookup", defineTool(keyedRead, runTicket)],
    ]),
    shutdown: new AbortController().signal,
  });
  const operations = {
    startReconciliation: async () => "op_reconcile",
    startJob: async () => "op_job",
    announce: async () => undefined,
  } as unknown as OperationTracker;
  const collection = { insertOne: async () => ({ acknowledged: true }) };
  const handler = executorHandler({
    bus,
    contracts: { registry: () => registry, resolve: async (hash: string) => registry.getByHash(hash) },
    invoker,
    store,
    operations,
    verifier,
    // Unless a test passes a ledger, no decision carries an approval and no contract requires one: it is never read.
    approvals,
    evidence: collection as unknown as Collection<EvidenceRecord>,
    deadLetters: collection as unknown as Collection<DeadLetterRecord>,
    executorId: "executor-a",
    leaseMarginMs: 500,
    leases: new LeaseKeeper({ store, owner: "executor-a", leaseMs: 3_000, logger: createLogger({ service: "test", level: "silent" }) }),
    maxDeliveries: 5,
    maxAbandonedAttempts: 2,
    logger: createLogger({ service: "test", level: "silent" }),
    random: () => 0.5,
    sleep: async () => undefined,
    ...(metrics ? { metrics } : {}),
  });
  return { handler, published, runs: () => runs, types: () => published.map((e) => e.id.split(":").slice(1).join(":")) };
}

const ok = (): ToolOutcome => ({ ok: true, data: { id: "T-1" } });

describe("executorHandler", () => {
  it("runs a claimed call once and publishes started then completed, with deterministic ids", async () => {
    const store = new ScriptedStore([{ kind: "claimed", attempt: 1, firstClaimAt: Date.now() }]);
    const h = harness(store, ok);
    const event = authorized();
    expect(await h.handler(event, delivery())).toEqual({ kind: "ack" });
    expect(h.runs()).toBe(1);
    expect(h.types()).toEqual(["started:1", "completed:1"]);
    expect(store.completed[0]!.result).toMatchObject({ ok: true, data: { id: "T-1" }, call_id: event.call_id });
    // The key comes from the runtime: tool, run and call, never from the arguments.
    expect(store.claims[0]!.key).toBe(`create_ticket:${event.run_id}:${event.call_id}`);
  });

  it("publishes no outcome when fenced out at completion, and leaves the message to be looked at again", async () => {
    const h = harness(new ScriptedStore([{ kind: "claimed", attempt: 1, firstClaimAt: Date.now() }], true), ok);
    // Not acknowledged: JetStream would take this older delivery's ack as the message's, and the attempt that took
    // over could then die without anyone delivering the call again.
    expect(await h.handler(authorized(), delivery())).toMatchObject({ kind: "retry", delayMs: 1_000 });
    expect(h.types()).toEqual(["started:1"]);
  });

  it("tells a duplicate to look again soon while another attempt holds the key, not after the whole lease", async () => {
    const h = harness(new ScriptedStore([{ kind: "busy", retryAfterMs: 30_000, owner: "executor-b" }]), ok);
    const disposition = await h.handler(authorized(), delivery(1));
    expect(disposition).toMatchObject({ kind: "retry" });
    expect((disposition as { delayMs: number }).delayMs).toBeLessThanOrEqual(200);
    expect(h.runs()).toBe(0);
    expect(h.published).toEqual([]);
  });

  it("replays a completed key under the new call id without running anything", async () => {
    const stored = { ok: true as const, data: { id: "T-1" }, retryable: false as const, call_id: newCallId() };
    const h = harness(new ScriptedStore([{ kind: "replay", result: stored, attempt: 2 }]), ok);
    const event = authorized();
    await h.handler(event, delivery());
    expect(h.runs()).toBe(0);
    expect(h.published).toHaveLength(1);
    expect(h.published[0]).toMatchObject({ id: `${event.call_id}:completed:2`, payload: { result: { call_id: event.call_id, replayed: true } } });
  });

  it("never repeats a write whose previous attempt was abandoned: the outcome is unknown and reconciled", async () => {
    const h = harness(new ScriptedStore([{ kind: "taken_over", attempt: 2, previousOwner: "dead", abandoned: 1, firstClaimAt: Date.now() }]), ok);
    await h.handler(authorized(), delivery(2));
    expect(h.runs()).toBe(0);
    expect(h.types()).toEqual(["outcome_unknown:2"]);
    expect(h.published[0]).toMatchObject({ payload: { result: { error: { code: "OUTCOME_UNKNOWN" }, operation_id: "op_reconcile" } } });
  });

  it("schedules a retry of a retryable failure no sooner than its Retry-After", async () => {
    const store = new ScriptedStore([{ kind: "claimed", attempt: 1, firstClaimAt: Date.now() }]);
    const h = harness(store, () => ({ ok: false, code: "UPSTREAM_UNAVAILABLE", message: "down", retryable: true, details: { retry_after_ms: 400 } }));
    const before = Date.now();
    const disposition = await h.handler(authorized(), delivery(1));
    expect(disposition).toMatchObject({ kind: "retry", delayMs: 400 });
    expect(h.types()).toEqual(["started:1", "retry_scheduled:1"]);
    expect(store.retries[0]!.notBefore.getTime()).toBeGreaterThanOrEqual(before + 400);
    expect(store.completed).toEqual([]);
  });

  it("completes a non-retryable failure at once", async () => {
    const store = new ScriptedStore([{ kind: "claimed", attempt: 1, firstClaimAt: Date.now() }]);
    const h = harness(store, () => ({ ok: false, code: "STATE_CONFLICT", message: "closed" }));
    expect(await h.handler(authorized(), delivery(1))).toEqual({ kind: "ack" });
    expect(h.types()).toEqual(["started:1", "completed:1"]);
  });

  it("runs no tool on the last delivery: the call is dead-lettered with a terminal result", async () => {
    const h = harness(new ScriptedStore([{ kind: "claimed", attempt: 1, firstClaimAt: Date.now() }]), ok);
    await h.handler(authorized(), delivery(5));
    expect(h.runs()).toBe(0);
    expect(h.types()).toEqual(["dead_lettered:1", "completed:1"]);
    expect(h.published[1]).toMatchObject({ payload: { result: { ok: false, error: { code: "EXECUTION_ERROR" } } } });
  });

  it("refuses an authorization whose arguments were changed after signing, runs nothing and still ends the call", async () => {
    const h = harness(new ScriptedStore([{ kind: "claimed", attempt: 1, firstClaimAt: Date.now() }]), ok);
    const event = authorized();
    const tampered = { ...event, payload: { ...event.payload, arguments: { title: "rm -rf" } } };
    expect(await h.handler(tampered, delivery())).toEqual({ kind: "ack" });
    expect(h.runs()).toBe(0);
    expect(h.types()).toEqual(["refused:1", "completed:1"]);
    expect(h.published[0]).toMatchObject({ payload: { reason: "arguments_not_bound" } });
    expect(h.published[1]).toMatchObject({ payload: { result: { error: { code: "PERMISSION_DENIED" } } } });
  });
  it("checks an approval before anything else: a plan nobody approved runs nothing and ends the call", async () => {
    const ledger: ApprovalLedger = {
      getRequest: async () => null,
      getDecision: async () => null,
      getConsumption: async () => null,
      consume: async (record) => ({ first: true, consumption: record }),
    };
    const store = new ScriptedStore([{ kind: "claimed", attempt: 1, firstClaimAt: Date.now() }]);
    const h = harness(store, ok, ledger);
    await h.handler(authorized({ title: "x" }, { approval_id: "apr_1", plan_hash: `sha256:${"c".repeat(64)}` }), delivery());
    expect(h.runs()).toBe(0);
    expect(store.claims).toEqual([]);
    expect(h.types()).toEqual(["refused:1", "completed:1"]);
    expect(h.published[0]).toMatchObject({ payload: { reason: "approval_invalid", detail: expect.stringMatching(/^APPROVAL_MISMATCH: /) } });
    expect(h.published[1]).toMatchObject({ payload: { result: { error: { code: "APPROVAL_MISMATCH" } } } });
  });
});

describe("the record of an attempt", () => {
  const claimed = (): ScriptedStore => new ScriptedStore([{ kind: "claimed", attempt: 1, firstClaimAt: Date.now() }]);

  it("runs a writing tool only once the stream has acknowledged its started event, naming executor and attempt", async () => {
    const storedWhenRun: string[][] = [];
    const h: ReturnType<typeof harness> = harness(
      claimed(),
      () => {
        storedWhenRun.push(h.types());
        return ok();
      },
      undefined,
      // The stream takes its time over `started`.
      async (event, stored) => {
        if (event.type === "started") await new Promise((resolve) => setTimeout(resolve, 30));
        return stored();
      },
    );
    const event = authorized();
    expect(await h.handler(event, delivery())).toEqual({ kind: "ack" });
    expect(storedWhenRun).toEqual([["started:1"]]);
    expect(h.published[0]).toMatchObject({ id: `${event.call_id}:started:1`, attempt: 1, payload: { executor_id: "executor-a" } });
    expect(h.types()).toEqual(["started:1", "completed:1"]);
  });

  it("does not run a write whose started event was not acknowledged: the attempt ends without effect and is retried", async () => {
    const store = claimed();
    const h = harness(store, ok, undefined, async (event, stored) => {
      if (event.type === "started") throw new Error("publish not acknowledged");
      return stored();
    });
    const disposition = await h.handler(authorized(), delivery(1));
    expect(disposition).toMatchObject({ kind: "retry" });
    expect(h.runs()).toBe(0);
    expect(store.retries).toHaveLength(1);
    expect(store.retries[0]!.attempt).toBe(1);
    expect(store.completed).toEqual([]);
    expect(h.types()).toEqual(["retry_scheduled:1"]);
    expect(h.published[0]).toMatchObject({ payload: { failed_attempt: 1, code: "UPSTREAM_UNAVAILABLE" } });
  });

  it("publishes the retries of earlier attempts again before its own start: a lost retry_scheduled leaves no gap", async () => {
    // Attempts 1 and 2 ended retryably; neither's retry_scheduled reached the stream (it had no leader).
    const at = Date.now() - 5_000;
    const retried = [
      { attempt: 1, code: "UPSTREAM_UNAVAILABLE", at, notBefore: at + 100 },
      { attempt: 2, code: "UPSTREAM_UNAVAILABLE", at: at + 200, notBefore: at + 400 },
    ];
    const h = harness(new ScriptedStore([{ kind: "claimed", attempt: 3, firstClaimAt: at, retried }]), ok);
    const event = authorized();
    expect(await h.handler(event, delivery(3))).toEqual({ kind: "ack" });
    expect(h.types()).toEqual(["retry_scheduled:1", "retry_scheduled:2", "started:3", "completed:3"]);
    // Under their original ids and sequence numbers, with what the store recorded: time + delay is the not-before.
    expect(h.published.slice(0, 2)).toMatchObject([
      { seq: event.seq + 2, attempt: 1, time: new Date(at).toISOString(), payload: { failed_attempt: 1, code: "UPSTREAM_UNAVAILABLE", delay_ms: 100 } },
      { seq: event.seq + 4, attempt: 2, payload: { failed_attempt: 2, delay_ms: 200 } },
    ]);
    expect(h.published[2]).toMatchObject({ seq: event.seq + 5 });
  });

  it("does not run a write whose earlier attempts' trace cannot be published: that attempt ends without effect too", async () => {
    const at = Date.now() - 1_000;
    const store = new ScriptedStore([
      { kind: "claimed", attempt: 2, firstClaimAt: at, retried: [{ attempt: 1, code: "UPSTREAM_UNAVAILABLE", at, notBefore: at + 50 }] },
    ]);
    const h = harness(store, ok, undefined, async (event, stored) => {
      if (event.type === "retry_scheduled" && event.attempt === 1) throw new Error("publish not acknowledged");
      return stored();
    });
    expect(await h.handler(authorized(), delivery(2))).toMatchObject({ kind: "retry" });
    expect(h.runs()).toBe(0);
    expect(store.retries).toEqual([expect.objectContaining({ attempt: 2 })]);
    // Its own start went out alongside (in order, on one connection): the trail says it started and failed.
    expect(h.types()).toEqual(["started:2", "retry_scheduled:2"]);
  });

  it("keeps a read off that wait: the tool runs while its started event is still on its way", async () => {
    let acknowledge: () => void = () => undefined;
    const h = harness(
      claimed(),
      () => {
        // Only the tool's run lets the stream answer: a read that waited for `started` would never get here.
        acknowledge();
        return { ok: true, data: { id: "T-1" } };
      },
      undefined,
      async (event, stored) => {
        if (event.type === "started") await new Promise<void>((resolve) => (acknowledge = resolve));
        return stored();
      },
    );
    expect(await h.handler(authorized({ title: "disk full" }, undefined, read_), delivery())).toEqual({ kind: "ack" });
    expect(h.runs()).toBe(1);
    expect(h.types()).toEqual(["started:1", "completed:1"]);
  });

  it("runs a read before claiming its key, then claims it already done: one write, started then completed", async () => {
    const store = new ScriptedStore([]);
    const h = harness(store, ok);
    const event = authorized({ title: "disk full" }, undefined, read_);
    expect(await h.handler(event, delivery())).toEqual({ kind: "ack" });
    expect(h.runs()).toBe(1);
    expect(store.claims).toEqual([]);
    expect(store.completed).toEqual([]);
    expect(store.claimedDone).toEqual([
      {
        request: expect.objectContaining({ key: `ticket_status:${event.run_id}:${event.call_id}`, owner: "executor-a" }),
        result: expect.objectContaining({ ok: true, data: { id: "T-1" } }),
      },
    ]);
    expect(h.types()).toEqual(["started:1", "completed:1"]);
    expect(h.published[1]).toMatchObject({ payload: { result: { ok: true, data: { id: "T-1" }, call_id: event.call_id } } });
  });

  it("publishes a read's answer alongside the write of its own key, and is done only once both are", async () => {
    let landed!: () => void;
    const landing = new Promise<void>((resolve) => (landed = resolve));
    const store = new ScriptedStore([], false, false, () => landing);
    const h = harness(store, ok);
    const handled = h.handler(authorized({ title: "disk full" }, undefined, read_), delivery());
    let done = false;
    void handled.then(() => (done = true));
    await expect.poll(() => h.types()).toEqual(["started:1", "completed:1"]);
    expect(done).toBe(false);
    landed();
    expect(await handled).toEqual({ kind: "ack" });
    expect(store.claimedDone).toHaveLength(1);
    expect(store.claims).toEqual([]);
  });

  it("sends a read's answer right behind its started, without waiting for the stream to acknowledge it", async () => {
    const sent: string[] = [];
    let acknowledge!: () => void;
    const acknowledged = new Promise<void>((resolve) => (acknowledge = resolve));
    const h = harness(new ScriptedStore([]), ok, undefined, async (event, stored) => {
      sent.push(event.type);
      if (event.type === "started") await acknowledged;
      return stored();
    });
    const handled = h.handler(authorized({ title: "disk full" }, undefined, read_), delivery());
    let done = false;
    void handled.then(() => (done = true));
    // Both are on the connection, in order, while `started` waits for its acknowledgement.
    await expect.poll(() => sent).toEqual(["started", "completed"]);
    expect(h.types()).toEqual(["completed:1"]);
    expect(done).toBe(false);
    acknowledge();
    expect(await handled).toEqual({ kind: "ack" });
    expect(h.types()).toEqual(["completed:1", "started:1"]);
  });

  it("publishes a read's lost started again, behind its answer, before the message is done", async () => {
    let lost = 0;
    const h = harness(new ScriptedStore([]), ok, undefined, async (event, stored) => {
      if (event.type === "started" && lost++ === 0) throw new Error("publish not acknowledged");
      return stored();
    });
    expect(await h.handler(authorized({ title: "disk full" }, undefined, read_), delivery())).toEqual({ kind: "ack" });
    expect(lost).toBe(2);
    expect(h.types()).toEqual(["completed:1", "started:1"]);
  });
  it("ends a read with its own answer when a racing delivery of the same call stored the key first", async () => {
    // The stream keeps the first `completed` under the call's event id: both deliveries end the call with one answer.
    const store = new ScriptedStore([], false, true);
    const h = harness(store, ok);
    expect(await h.handler(authorized({ title: "disk full" }, undefined, read_), delivery())).toEqual({ kind: "ack" });
    expect(store.claims).toEqual([]);
    expect(h.types()).toEqual(["started:1", "completed:1"]);
    expect(h.published[1]).toMatchObject({ payload: { result: { ok: true, data: { id: "T-1" } } } });
  });

  it("gives the stored answer, not its own, when a read's business key was taken while it ran", async () => {
    const first = success(newCallId(), { id: "T-0" });
    const store = new ScriptedStore([{ kind: "replay", result: first, attempt: 1 }], false, true);
    const h = harness(store, ok);
    expect(await h.handler(authorized({ title: "disk full" }, undefined, keyedRead_), delivery())).toEqual({ kind: "ack" });
    expect(h.runs()).toBe(1);
    expect(store.claims).toHaveLength(1);
    expect(h.types()).toEqual(["started:1", "completed:1"]);
    expect(h.published[1]).toMatchObject({ payload: { result: { ok: true, data: { id: "T-0" }, replayed: true } } });
  });

  it("claims a read's key first on a redelivery: a stored answer is replayed and nothing runs", async () => {
    const store = new ScriptedStore([{ kind: "replay", result: success(newCallId(), { id: "T-0" }), attempt: 1 }]);
    const h = harness(store, ok);
    expect(await h.handler(authorized({ title: "disk full" }, undefined, read_), delivery(2))).toEqual({ kind: "ack" });
    expect(h.runs()).toBe(0);
    expect(store.claimedDone).toEqual([]);
    expect(h.types()).toEqual(["completed:1"]);
  });

  it("claims a read that failed retryably before deciding on a retry, and does not run it again for the claim", async () => {
    // The read's contract allows no retry: the claimed attempt completes with the failure it already had.
    const store = new ScriptedStore([{ kind: "claimed", attempt: 1, firstClaimAt: Date.now() }]);
    const h = harness(store, () => ({ ok: false, code: "UPSTREAM_UNAVAILABLE", message: "down", retryable: true }));
    expect(await h.handler(authorized({ title: "disk full" }, undefined, read_), delivery())).toEqual({ kind: "ack" });
    expect(h.runs()).toBe(1);
    expect(store.claimedDone).toEqual([]);
    expect(store.claims).toHaveLength(1);
    expect(store.completed).toEqual([
      { attempt: 1, result: expect.objectContaining({ ok: false, error: expect.objectContaining({ code: "UPSTREAM_UNAVAILABLE" }) }) },
    ]);
    expect(h.types()).toEqual(["started:1", "completed:1"]);
  });

  it("makes a write that threw a reset connection an unknown outcome sent to reconciliation, never EXECUTION_ERROR", async () => {
    const store = claimed();
    const h = harness(store, () => {
      throw Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" });
    });
    expect(await h.handler(authorized(), delivery())).toEqual({ kind: "ack" });
    expect(h.types()).toEqual(["started:1", "outcome_unknown:1"]);
    expect(h.published[1]).toMatchObject({ payload: { result: { ok: false, error: { code: "OUTCOME_UNKNOWN" }, operation_id: "op_reconcile" } } });
    expect(JSON.stringify(h.published[1])).not.toContain("ECONNRESET");
    expect(store.completed[0]!.result).toMatchObject({ error: { code: "OUTCOME_UNKNOWN" } });
  });
});

describe("the executor's metrics", () => {
  const claimed = (): ScriptedStore => new ScriptedStore([{ kind: "claimed", attempt: 1, firstClaimAt: Date.now() }]);
  const measured = () => executorMetrics(new ServiceMetrics({ service: "executor", stats: new RuntimeStats() }));
  /** The samples of one metric as `labels → value` (histograms: their count). */
  const values = async (metric: { get(): Promise<{ values: { value: number; labels: object; metricName?: string }[] }> }) =>
    (await metric.get()).values
      .filter((v) => v.metricName === undefined || v.metricName.endsWith("_count"))
      .map((v) => ({ labels: { ...v.labels }, value: v.value }));

  it("observes each attempt that ran and counts a scheduled retry by tool and code", async () => {
    const m = measured();
    const h = harness(claimed(), () => ({ ok: false, code: "UPSTREAM_UNAVAILABLE", message: "down", retryable: true }), undefined, undefined, m);
    await h.handler(authorized(), delivery(1));
    expect(await values(m.retries)).toEqual([{ labels: { tool: "create_ticket", code: "UPSTREAM_UNAVAILABLE" }, value: 1 }]);
    expect(await values(m.executions)).toEqual([{ labels: { tool: "create_ticket" }, value: 1 }]);
    expect(await values(m.unknownOutcomes)).toEqual([]);
  });

  it("counts a dead letter, and an unknown outcome only once it is stored and published", async () => {
    const m = measured();
    await harness(claimed(), ok, undefined, undefined, m).handler(authorized(), delivery(5));
    expect(await values(m.deadLetters)).toEqual([{ labels: { tool: "create_ticket" }, value: 1 }]);
    expect(await values(m.executions)).toEqual([]);

    const reset = () => {
      throw Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" });
    };
    await harness(new ScriptedStore([{ kind: "claimed", attempt: 1, firstClaimAt: Date.now() }], true), reset, undefined, undefined, m).handler(
      authorized(),
      delivery(),
    );
    expect(await values(m.unknownOutcomes)).toEqual([]);
    await harness(claimed(), reset, undefined, undefined, m).handler(authorized(), delivery());
    expect(await values(m.unknownOutcomes)).toEqual([{ labels: { tool: "create_ticket" }, value: 1 }]);
  });

  it("counts claims that found the key used, and a replayed unknown outcome is not a new one", async () => {
    const m = measured();
    const stored = { ok: false as const, error: { code: "OUTCOME_UNKNOWN" as const, message: "m" }, retryable: false as const, call_id: newCallId() };
    await harness(new ScriptedStore([{ kind: "replay", result: stored, attempt: 1 }]), ok, undefined, undefined, m).handler(authorized(), delivery());
    await harness(new ScriptedStore([{ kind: "busy", retryAfterMs: 10, owner: "b" }]), ok, undefined, undefined, m).handler(authorized(), delivery());
    expect(await values(m.idempotency)).toEqual([
      { labels: { tool: "create_ticket", outcome: "replay" }, value: 1 },
      { labels: { tool: "create_ticket", outcome: "busy" }, value: 1 },
    ]);
    expect(await values(m.unknownOutcomes)).toEqual([]);
  });
});
