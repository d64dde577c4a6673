import { jetstreamManager } from "@nats-io/jetstream";
import type { NatsEventBus } from "@toolgate/bus";
import { ClaimLedger } from "@toolgate/bus";
import { callIdFloor, newCallId, newRunId, subjectCatalogue, type RunId } from "@toolgate/contracts";
import { connectTestBus, testDatabase, uniqueName } from "@toolgate/testkit";
import type { Collection } from "mongodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hostCallKey, HostCallKeys, type HostCallKey } from "./host-call-keys.js";

let database: Awaited<ReturnType<typeof testDatabase>>;
let bus: NatsEventBus;
let ledger: ClaimLedger;
let legacy: Collection<HostCallKey>;
const subjects = subjectCatalogue(uniqueName("t"));
const stream = `${subjects.stream}_HOST_CALLS`;

beforeAll(async () => {
  database = await testDatabase();
  legacy = database.db.collection<HostCallKey>("host_call_keys");
  bus = await connectTestBus("host-call-keys-test", subjects, {
    maxEventBytes: 8 * 1024,
    stream: { replicas: 1, maxAgeMs: 60_000, duplicateWindowMs: 60_000 },
  });
  ledger = await ClaimLedger.open(bus, { stream, subjectPrefix: `${subjects.prefix}.host_calls`, replicas: 1, maxValueBytes: 16 * 1024 });
});

afterAll(async () => {
  const jsm = await jetstreamManager(bus.connection);
  await jsm.streams.delete(stream);
  await jsm.streams.delete(subjects.stream);
  await bus.close();
  await database.dispose();
});

/** A run id minted at `ms` (epoch). */
const runAt = (ms: number): RunId => callIdFloor(ms).replace("call_", "run_");

function key(runId: RunId, providerCallId: string, signature = "sha256:a"): HostCallKey {
  return hostCallKey({ _id: newCallId(), run_id: runId, provider_call_id: providerCallId, tool_name: "create_ticket", signature, created_at: new Date() });
}

describe("HostCallKeys", () => {
  it("lets one of two replicas' concurrent claims of a provider call id stand and shows the other the call it stands for", async () => {
    const replicaA = new HostCallKeys(ledger, legacy);
    const replicaB = new HostCallKeys(ledger, legacy);
    const run = newRunId();
    // Any character, any length up to the provider's: the ledger's subject holds only its digest.
    const first = key(run, "toolu_01.a b>*\u00e9".repeat(10));
    const second = key(run, first.provider_call_id, "sha256:b");
    const [a, b] = await Promise.all([replicaA.claim([first]), replicaB.claim([second])]);
    const outcomes = [a[0]!, b[0]!];
    expect(outcomes.filter((o) => o.kind === "claimed")).toHaveLength(1);
    const other = outcomes.find((o) => o.kind === "existing");
    const winner = outcomes[0]!.kind === "claimed" ? first : second;
    expect(other).toEqual({ kind: "existing", key: { ...winner, created_at: winner.created_at } });
    // A later claim of the same id, from either, finds the same call.
    const later = await replicaA.claim([key(run, first.provider_call_id)]);
    expect(later[0]).toMatchObject({ kind: "existing", key: { call_id: winner.call_id, signature: winner.signature } });
  });

  it("claims each key of a submission on its own, and the same id in another run is another key", async () => {
    const keys = new HostCallKeys(ledger, legacy);
    const run = newRunId();
    const taken = key(run, "call_a");
    await keys.claim([taken]);
    const claims = await keys.claim([key(run, "call_a"), key(run, "call_b"), key(newRunId(), "call_a")]);
    expect(claims.map((c) => c.kind)).toEqual(["existing", "claimed", "claimed"]);
  });

  it("honours a key an earlier release stored in the database for a run minted before the ledger, and only for such runs", async () => {
    const old = runAt(ledger.since.getTime() - 86_400_000);
    const stored = key(old, "toolu_legacy");
    await legacy.insertOne(stored);
    const keys = new HostCallKeys(ledger, legacy);
    const [found] = await keys.claim([key(old, "toolu_legacy")]);
    expect(found).toEqual({ kind: "existing", key: stored });
    // A run minted long after the ledger existed was never served by a release that kept keys there: not read.
    const recent = runAt(ledger.since.getTime() + 2 * 3_600_000);
    await legacy.insertOne(key(recent, "toolu_legacy"));
    expect((await keys.claim([key(recent, "toolu_legacy")]))[0]).toEqual({ kind: "claimed" });
  });

  it("treats an id held by something that is not a claim as taken, by no call it can name", async () => {
    const keys = new HostCallKeys(ledger, legacy);
    const run = newRunId();
    const wanted = key(run, "toolu_forged");
    // A peer on the bus published there first (what per-service permissions are to prevent).
    const digest = wanted._id.slice(run.length + 1).replace(/^sha256:/, "");
    await ledger.claim([run, digest], new TextEncoder().encode("{not a claim"), "forged");
    expect((await keys.claim([wanted]))[0]).toEqual({ kind: "unreadable" });
  });
});
