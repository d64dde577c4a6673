import { randomBytes } from "node:crypto";
import { failure, newCallId, newRunId, success } from "@toolgate/contracts";
import { MongoClient, type Db } from "mongodb";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { MongoOperationStore, type OperationRecord } from "./operation-store.js";

// The servers the test run's global setup resolved (packages/testkit/src/global-setup.ts provides them).
declare module "vitest" {
  export interface ProvidedContext {
    toolgateInfra: { natsUrl: string; mongoUrl: string };
  }
}

const uniqueName = (prefix: string): string => `${prefix}${randomBytes(5).toString("hex")}`;
let client: MongoClient;
let db: Db;

beforeAll(async () => {
  client = await new MongoClient(inject("toolgateInfra").mongoUrl).connect();
  db = client.db(uniqueName("tg_test_ops_"));
});
afterAll(async () => {
  await db.dropDatabase().catch(() => undefined);
  await client.close();
});

function record(id = `op_${uniqueName("")}`): OperationRecord {
  const now = new Date();
  return {
    _id: id,
    kind: "job",
    call_id: newCallId(),
    run_id: newRunId(),
    principal: { tenant: "acme", subject: "alice", roles: [] },
    context: {},
    tool: { name: "chaos_job", version: "1.0.0", hash: `sha256:${"a".repeat(64)}` },
    seq: 4,
    attempt: 1,
    idempotency_key: "chaos_job:run:call",
    tool_operation_id: "job_1",
    created_at: now,
    not_before: now,
    deadline: new Date(now.getTime() + 60_000),
  };
}

describe("MongoOperationStore", () => {
  it("tracks accepted → running → succeeded, each state written once", async () => {
    const store = new MongoOperationStore(db, uniqueName("ops_"));
    const op = record();
    await store.create(op);
    await store.create({ ...op, tool_operation_id: "another" });
    expect(await store.get(op._id)).toMatchObject({ state: "accepted", record: { tool_operation_id: "job_1" } });
    expect(await store.advance(op._id, "running")).toBe(true);
    expect(await store.advance(op._id, "running")).toBe(false);
    const result = success(op.call_id, { n: 1 }, { operation_id: op._id });
    expect(await store.advance(op._id, "succeeded", result)).toBe(true);
    expect(await store.get(op._id)).toMatchObject({ state: "succeeded", result });
    expect(await store.get("op_missing")).toBeUndefined();
  });

  it("lets exactly one of two racing final states win", async () => {
    const store = new MongoOperationStore(db, uniqueName("ops_"));
    const ops = Array.from({ length: 8 }, () => record());
    for (const op of ops) await store.create(op);
    const races = await Promise.all(
      ops.map(async (op) => {
        const [succeeded, cancelled] = await Promise.all([store.advance(op._id, "succeeded", success(op.call_id, 1)), store.advance(op._id, "cancelled")]);
        return { succeeded, cancelled, state: (await store.get(op._id))!.state };
      }),
    );
    for (const race of races) {
      expect(race.succeeded !== race.cancelled).toBe(true);
      expect(race.state).toBe(race.succeeded ? "succeeded" : "cancelled");
    }
  });

  it("keeps a reconciliation's finding with its result", async () => {
    const store = new MongoOperationStore(db, uniqueName("ops_"));
    const op = { ...record(), kind: "reconciliation" as const, cause: "timeout" as const };
    await store.create(op);
    const result = failure(op.call_id, "TIMEOUT", "did not take effect", { retryable: true });
    await store.advance(op._id, "failed", result, "not_applied");
    expect(await store.get(op._id)).toMatchObject({ state: "failed", reconciled: "not_applied", result });
  });

  it("purges finished operations older than the cutoff, never unfinished ones", async () => {
    const store = new MongoOperationStore(db, uniqueName("ops_"));
    const finished = record();
    const running = record();
    await store.create(finished);
    await store.create(running);
    await store.advance(finished._id, "failed", failure(finished.call_id, "TIMEOUT", "late"));
    await store.advance(running._id, "running");
    expect(await store.purgeFinished(new Date(Date.now() - 60_000))).toBe(0);
    expect(await store.purgeFinished(new Date(Date.now() + 1_000))).toBe(1);
    expect(await store.get(finished._id)).toBeUndefined();
    expect(await store.get(running._id)).toMatchObject({ state: "running" });
  });
});
