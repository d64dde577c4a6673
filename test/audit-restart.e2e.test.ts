import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { Stack, testInfra, waitFor } from "@toolgate/testkit";
import { MongoClient } from "mongodb";
import { afterAll, beforeAll, expect, it } from "vitest";

let stack: Stack;
let mongo: MongoClient;

beforeAll(async () => {
  const infra = testInfra();
  stack = await Stack.start({
    natsUrl: infra.natsUrl,
    mongoUrl: infra.mongoUrl,
    env: { executor: { EXECUTOR_FAULTS: JSON.stringify({ slowSearch: { pattern: "slow backend", delayMs: 5_000 } }) } },
  });
  mongo = await new MongoClient(infra.mongoUrl).connect();
});

afterAll(async () => {
  await stack?.stop();
  await mongo?.db(`${stack.name}_runtime`).dropDatabase();
  await mongo?.db(`${stack.name}_tools`).dropDatabase();
  await mongo?.close();
});

/** Every event id audit stored, once per time it was stored (the ledger's blocks hold the records). */
async function storedIds(): Promise<string[]> {
  const blocks = await mongo.db(`${stack.name}_runtime`).collection<{ records_json: string }>("audit_log").find({}).toArray();
  return blocks.flatMap((b) => (JSON.parse(b.records_json) as { id: string }[]).map((r) => r.id));
}

it("loses no event and stores none twice when audit is killed mid-run and restarted", async () => {
  const input = "Research task task_id=task_c04: state management.";
  // The timeout runs take over two seconds, so runs are still in flight when audit dies.
  const models = [...Array<string>(8).fill("scripted:c04"), ...Array<string>(4).fill("scripted:c04-timeout")];
  const runs = models.map((model) => stack.runToEnd(model, input, { task_id: "task_c04" }));

  await waitFor(async () => (await storedIds()).length >= 30, { description: "audit storing the first events" });
  await stack.process("audit").kill();
  const inFlight = await mongo.db(`${stack.name}_runtime`).collection("runs").countDocuments({ status: "running" });
  expect(inFlight).toBeGreaterThan(0);

  const finished = await Promise.all(runs);
  expect(finished.every((r) => r.status === "completed")).toBe(true);
  await stack.startService("audit");

  // The stream is the source of truth: every event published for this stack, once (dedup by event id).
  const nc = await connect({ servers: testInfra().natsUrl });
  try {
    const jsm = await jetstreamManager(nc);
    const streamName = `${stack.name.toUpperCase()}_EVENTS`;
    const total = (await jsm.streams.info(streamName)).state.messages;
    await waitFor(async () => (await storedIds()).length === total || undefined, {
      timeoutMs: 30_000,
      description: `audit catching up to ${total} events`,
    });
    const published = new Set<string>();
    for (let seq = 1; seq <= total; seq++) {
      const msg = await jsm.streams.getMessage(streamName, { seq });
      published.add(msg!.json<{ id: string }>().id);
    }
    const stored = await storedIds();
    expect(stored.length).toBe(total);
    expect(new Set(stored)).toEqual(published);
  } finally {
    await nc.close();
  }

  for (const run of finished) {
    const verified = await stack.audit<{ ok: boolean }>(`/v1/runs/${run.run_id}/verify`);
    expect(verified.body.ok).toBe(true);
  }
});
