import { generateKeyPairSync } from "node:crypto";
import { jetstreamManager } from "@nats-io/jetstream";
import { eventId, eventSigner, eventTrust, newCallId, newRunId, subjectCatalogue, type SubjectCatalogue, type ToolgateEvent } from "@toolgate/contracts";
import { createLogger } from "@toolgate/telemetry";
import { testInfra, uniqueName } from "@toolgate/testkit";
import { afterEach, describe, expect, it } from "vitest";
import { NatsEventBus } from "./nats-event-bus.js";

// NatsEventBus.history against a real server: what a run's timeline reads back from the stream.
const logger = createLogger({ service: "test", level: "silent" });
const principal = { tenant: "acme", subject: "alice", roles: ["analyst"] };
const pkcs8 = (key: ReturnType<typeof generateKeyPairSync>["privateKey"]) => key.export({ type: "pkcs8", format: "der" }).toString("base64");
const spki = (key: ReturnType<typeof generateKeyPairSync>["publicKey"]) => key.export({ type: "spki", format: "der" }).toString("base64");
const orchestratorKey = generateKeyPairSync("ed25519");
const executorKey = generateKeyPairSync("ed25519");
const trust = eventTrust([
  { role: "orchestrator", publicKey: spki(orchestratorKey.publicKey) },
  { role: "executor", publicKey: spki(executorKey.publicKey) },
]);

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function bus(subjects: SubjectCatalogue, signerKey: string | undefined, role: "orchestrator" | "executor" = "orchestrator"): Promise<NatsEventBus> {
  const opened = await NatsEventBus.connect({
    servers: testInfra().natsUrl,
    name: "history-test",
    subjects,
    maxEventBytes: 64 * 1024,
    stream: { replicas: 1, maxAgeMs: 10 * 60_000, duplicateWindowMs: 60_000 },
    logger,
    trust,
    ...(signerKey ? { signer: eventSigner(signerKey, role) } : {}),
  });
  cleanups.push(() => opened.close());
  return opened;
}

function event(kind: "call" | "run", id: string, runId: string, type: string, seq: number, attempt = 1): ToolgateEvent {
  const base = { v: 1, id: eventId(id, type, attempt), run_id: runId, seq, attempt, time: new Date().toISOString(), principal } as const;
  if (kind === "run") return { ...base, kind, type: "started", source: "orchestrator", payload: { model: "m", context: {} } };
  if (type === "started")
    return {
      ...base,
      kind,
      call_id: id,
      type,
      source: "executor",
      payload: { executor_id: "x1", idempotency_key_hash: `sha256:${"a".repeat(64)}` },
    };
  return {
    ...base,
    kind,
    call_id: id,
    type: "proposed",
    source: "orchestrator",
    payload: { provider_call_id: "p1", tool_name: "search_sources", arguments_json: "{}", context: {}, turn: 0 },
  };
}

async function stack() {
  const subjects = subjectCatalogue(uniqueName("h"));
  const orchestrator = await bus(subjects, pkcs8(orchestratorKey.privateKey));
  const executor = await bus(subjects, pkcs8(executorKey.privateKey), "executor");
  const jsm = await jetstreamManager(orchestrator.connection);
  cleanups.push(async () => void (await jsm.streams.delete(subjects.stream)));
  return { subjects, orchestrator, executor, jsm };
}

describe("NatsEventBus.history", () => {
  it("reads every stored event under the filters, oldest first, and nothing else", async () => {
    const { subjects, orchestrator, executor, jsm } = await stack();
    const runId = newRunId();
    const [a, b, other] = [newCallId(), newCallId(), newCallId()];
    await orchestrator.publish(event("run", runId, runId, "started", 1));
    await orchestrator.publish(event("call", a, runId, "proposed", 1));
    await orchestrator.publish(event("call", other, newRunId(), "proposed", 1));
    await executor.publish(event("call", a, runId, "started", 2, 1));
    await orchestrator.publish(event("call", b, runId, "proposed", 1));
    await executor.publish(event("call", a, runId, "started", 3, 2));

    const read = await orchestrator.history([`${subjects.prefix}.run.${runId}.*`, subjects.oneCall(a), subjects.oneCall(b)], 100);
    expect(read.truncated).toBe(false);
    expect(read.events.map((e) => e.id)).toEqual([
      eventId(runId, "started", 1),
      eventId(a, "proposed", 1),
      eventId(a, "started", 1),
      eventId(b, "proposed", 1),
      eventId(a, "started", 2),
    ]);
    // Nothing is left behind on the server: the read's consumer is gone.
    expect((await jsm.consumers.list(subjects.stream).next()).length).toBe(0);
    expect(await orchestrator.history([subjects.oneCall(newCallId())], 100)).toEqual({ events: [], truncated: false });
  });

  it("stops at the limit and says so", async () => {
    const { subjects, orchestrator } = await stack();
    const runId = newRunId();
    const calls = [newCallId(), newCallId(), newCallId()];
    for (const id of calls) await orchestrator.publish(event("call", id, runId, "proposed", 1));
    const read = await orchestrator.history(
      calls.map((id) => subjects.oneCall(id)),
      2,
    );
    expect(read.events.map((e) => e.kind === "call" && e.call_id)).toEqual(calls.slice(0, 2));
    expect(read.truncated).toBe(true);
  });

  it("leaves out an event not signed by its owner", async () => {
    const { subjects, orchestrator, executor } = await stack();
    const runId = newRunId();
    const callId = newCallId();
    await orchestrator.publish(event("call", callId, runId, "proposed", 1));
    // A `started` signed with the orchestrator's key: a forgery of the executor's event.
    const forged = event("call", callId, runId, "started", 2);
    orchestrator.connection.publish(subjects.call(callId, "started"), JSON.stringify(forged));
    await orchestrator.connection.flush();
    await orchestrator.publish({ ...forged, id: eventId(callId, "started", 9), attempt: 9 }).catch(() => undefined);
    await executor.publish(event("call", callId, runId, "started", 2, 2));
    const read = await orchestrator.history([subjects.oneCall(callId)], 100);
    expect(read.events.map((e) => e.id)).toEqual([eventId(callId, "proposed", 1), eventId(callId, "started", 2)]);
  });
});
