import { execFile, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { promisify } from "node:util";
import { jetstream, jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { seedAuthenticator, type NatsRole } from "@toolgate/bus";
import { eventId, newCallId } from "@toolgate/contracts";
import { PrivateNats, REPO_ROOT, Stack, resultOf, testInfra, waitFor, waitForCallEvents, type AuditedEvent } from "@toolgate/testkit";
import { MongoClient } from "mongodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// The server itself holds every connection to its identity's rights: a NATS server that admits only the
// identities `toolgate nats-auth` creates, the four services each with their own, and a connection with a
// subscriber's rights trying to push a call through by publishing the transitions other services own.
const DOC = "https://example.test/docs/openai-agents-sdk/sessions";
const CLI = `${REPO_ROOT}packages/cli/dist/cli.js`;
const run = promisify(execFile);

let nats: PrivateNats;
let stack: Stack;
let mongo: MongoClient;
let subscriber: NatsConnection;
let operator: NatsConnection;
let jsm: JetStreamManager;
/** Every subject the subscriber saw on the stack's call events. */
const seen: string[] = [];

const as = (role: NatsRole) => connect({ servers: nats.url, authenticator: seedAuthenticator(nats.seeds[role]!) });

beforeAll(async () => {
  nats = await PrivateNats.start({ identities: "only" });
  stack = await Stack.start({ natsUrl: nats.url, natsSeeds: nats.seeds, mongoUrl: testInfra().mongoUrl, ruleOfTwo: true });
  mongo = await new MongoClient(testInfra().mongoUrl).connect();
  subscriber = await as("subscriber");
  subscriber.subscribe(`${stack.name}.call.>`, {
    callback: (_error, msg) => {
      seen.push(msg.subject);
    },
  });
  operator = await as("operator");
  jsm = await jetstreamManager(operator);
});

afterAll(async () => {
  await subscriber?.close();
  await operator?.close();
  await stack?.stop();
  await mongo?.db(`${stack.name}_runtime`).dropDatabase();
  await mongo?.db(`${stack.name}_tools`).dropDatabase();
  await mongo?.close();
  await nats?.stop();
});

const evidence = (taskId: string) => mongo.db(`${stack.name}_tools`).collection("evidence").countDocuments({ task_id: taskId });

/** The stream's last message on `subject`, or undefined when it holds none. */
const stored = (subject: string) =>
  jsm.streams.getMessage(stack.eventStream, { last_by_subj: subject }).then(
    (m) => m ?? undefined,
    () => undefined,
  );

/** A save_evidence call of a run that read a document: policy holds it for approval (Rule of Two). */
async function pendingSave(taskId: string): Promise<{ callId: string; requested: AuditedEvent["event"] }> {
  const read = await stack.api<{ run_id: string }>("POST", "/v1/tool-calls", {
    context: { task_id: taskId },
    calls: [{ id: "h1", name: "fetch_document", arguments: { url: DOC } }],
    wait_ms: 30_000,
  });
  expect(read.status).toBe(200);
  const save = await stack.api<{ results: { call_id: string }[] }>("POST", "/v1/tool-calls", {
    run_id: read.body.run_id,
    calls: [{ id: "h2", name: "save_evidence", arguments: { task_id: taskId, claim: "sessions keep history", source_url: DOC } }],
    wait_ms: 0,
  });
  expect(save.status).toBe(202);
  const callId = save.body.results[0]!.call_id;
  const events = await waitForCallEvents(stack, callId, (es) => es.some((e) => e.type === "approval_requested"));
  return { callId, requested: events.find((e) => e.type === "approval_requested")! };
}

describe("NATS identities with subject permissions", () => {
  it("admits no connection without an identity", async () => {
    await expect(connect({ servers: nats.url, reconnect: false })).rejects.toThrow(/Authorization Violation/);
  });

  it("refuses a subscriber's forged proposed, authorized and completed, and the call goes on as if they had never been sent", async () => {
    const { callId, requested } = await pendingSave("task_forged");
    const js = jetstream(subscriber, { timeout: 5_000 });
    const forge = (id: string, type: "proposed" | "authorized" | "completed", payload: unknown) =>
      js.publish(`${stack.name}.call.${id}.${type}`, JSON.stringify({ ...requested, call_id: id, id: eventId(id, type, 1), type, payload }), {
        msgID: eventId(id, type, 1),
      });
    const forgedCall = newCallId();
    const forgeries = [
      forge(forgedCall, "proposed", { tool_name: "save_evidence", arguments: { task_id: "task_forged", claim: "x", source_url: DOC } }),
      forge(callId, "authorized", { decision: { call_id: callId } }),
      forge(callId, "completed", { result: { call_id: callId, ok: true, data: { stored: true } } }),
    ];
    for (const forgery of forgeries) await expect(forgery).rejects.toThrow(/Permissions Violation for Publish/);

    // Nothing of them reached the stream, the approval still waits, and nothing was written.
    for (const [id, type] of [
      [forgedCall, "proposed"],
      [callId, "authorized"],
      [callId, "completed"],
    ] as const)
      expect(await stored(`${stack.name}.call.${id}.${type}`)).toBeUndefined();
    expect((await stack.api<{ status: string }>("GET", `/v1/tool-calls/${callId}`)).body.status).toBe("pending");
    expect(await evidence("task_forged")).toBe(0);

    // The legitimate path is untouched: the approver approves, the call runs once.
    const approvalId = (requested.payload as { approval_id: string }).approval_id;
    const approved = await stack.policyApi<{ approval: { state: string } }>("POST", `/v1/approvals/${approvalId}/approve`, { reason: "checked" });
    expect([approved.status, approved.body.approval.state]).toEqual([200, "approved"]);
    expect(await resultOf(stack, callId)).toMatchObject({ ok: true, data: { stored: true } });
    const trail = await waitForCallEvents(stack, callId, (es) => es.some((e) => e.type === "result_attached"));
    expect(trail.map((e) => e.type)).toEqual(["proposed", "approval_requested", "approval_granted", "authorized", "started", "completed", "result_attached"]);
    expect(trail.map((e) => e.source)).toEqual(["orchestrator", "policy", "policy", "policy", "executor", "executor", "orchestrator"]);
    expect(await evidence("task_forged")).toBe(1);
    expect(await stored(`${stack.name}.call.${forgedCall}.proposed`)).toBeUndefined();

    // Read-only is still reading: the subscriber followed every legitimate transition of the call.
    await waitFor(() => seen.includes(`${stack.name}.call.${callId}.result_attached`) || undefined, { description: "the subscriber seeing the call attached" });
    expect(seen.filter((s) => s.startsWith(`${stack.name}.call.${callId}.`)).map((s) => s.split(".").pop())).toEqual(trail.map((e) => e.type));
  });

  it("lets a subscriber read the stream through a consumer of its own, never take work from a service's", async () => {
    const js = jetstream(subscriber, { timeout: 5_000 });
    const mine = await js.consumers.get(stack.eventStream, { filter_subjects: [`${stack.name}.call.*.proposed`] });
    const first = await mine.next({ expires: 5_000 });
    expect(first?.subject).toMatch(new RegExp(`^${stack.name}\\.call\\..+\\.proposed$`));
    // Pulling from the executor's durable would take authorized calls away from the executors.
    await expect(
      subscriber.request(`$JS.API.CONSUMER.MSG.NEXT.${stack.eventStream}.executor`, JSON.stringify({ batch: 1 }), { timeout: 5_000 }),
    ).rejects.toThrow(/Permissions Violation for Publish/);
    await expect(jsm.consumers.info(stack.eventStream, "executor")).resolves.toMatchObject({ name: "executor" });
  });

  it("refuses a service publishing a transition another service owns", async () => {
    const executor = await as("executor");
    try {
      const callId = newCallId();
      await expect(jetstream(executor, { timeout: 5_000 }).publish(`${stack.name}.call.${callId}.proposed`, "{}")).rejects.toThrow(
        /Permissions Violation for Publish/,
      );
      await expect(jetstream(executor, { timeout: 5_000 }).publish(`${stack.name}.call.${callId}.authorized`, "{}")).rejects.toThrow(
        /Permissions Violation for Publish/,
      );
      // Deleting what audit verifies is no service's right either.
      await expect(jetstreamManager(executor).then((m) => m.streams.purge(stack.eventStream))).rejects.toThrow(/Permissions Violation for Publish/);
      expect((await jsm.streams.info(stack.eventStream)).state.messages).toBeGreaterThan(0);
    } finally {
      await executor.close();
    }
  });

  it("toolgate tail follows the events with a subscriber's identity", async () => {
    const tail = spawn(process.execPath, [CLI, "tail"], {
      env: { PATH: process.env.PATH ?? "", NATS_URL: nats.url, TOOLGATE_SUBJECT_PREFIX: stack.name, NATS_NKEY_SEED: nats.seeds.subscriber! },
    });
    let output = "";
    let ready = "";
    tail.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    tail.stderr.on("data", (chunk: Buffer) => (ready += chunk.toString()));
    try {
      await waitFor(() => ready.includes("following"), { description: "the tail subscribing" });
      const read = await stack.api<{ results: { call_id: string }[] }>("POST", "/v1/tool-calls", {
        context: { task_id: "task_tail" },
        calls: [{ id: "h1", name: "fetch_document", arguments: { url: DOC } }],
        wait_ms: 30_000,
      });
      const callId = read.body.results[0]!.call_id;
      await waitFor(() => output.includes(`call.result_attached`) || undefined, { description: "the tail showing the call attached" });
      expect(output).toMatch(new RegExp(`call\\.completed\\s+${callId}\\s+fetch_document ok`));
    } finally {
      tail.kill("SIGINT");
    }
  });

  it("toolgate tail --call replays an ended call's history with a subscriber's identity", async () => {
    const read = await stack.api<{ results: { call_id: string }[] }>("POST", "/v1/tool-calls", {
      context: { task_id: "task_tail_replay" },
      calls: [{ id: "h1", name: "fetch_document", arguments: { url: DOC } }],
      wait_ms: 30_000,
    });
    const callId = read.body.results[0]!.call_id;
    await waitForCallEvents(stack, callId, (es) => es.some((e) => e.type === "result_attached"));
    // Read-only rights are enough to read a call's history from the stream (an ordered consumer of its own).
    const tail = spawn(process.execPath, [CLI, "tail", "--call", callId, "--json"], {
      env: { PATH: process.env.PATH ?? "", NATS_URL: nats.url, TOOLGATE_SUBJECT_PREFIX: stack.name, NATS_NKEY_SEED: nats.seeds.subscriber! },
    });
    let output = "";
    tail.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    try {
      await waitFor(() => output.includes('"type": "result_attached"') || undefined, { description: "the subscriber's tail replaying the call" });
      expect(output).toContain('"type": "proposed"');
      expect(output).toContain(callId);
    } finally {
      tail.kill("SIGINT");
    }
  });
});

describe("toolgate nats-auth", () => {
  it("writes a configuration the server accepts and seeds only their owner reads, and never overwrites them", async () => {
    const dir = mkdtempSync(join(tmpdir(), "tg-nats-auth-cli-"));
    const args = [CLI, "nats-auth", "--out", dir, "--include", relative(dir, join(REPO_ROOT, "infra/nats/server.conf")), "--prefix", "toolgate"];
    await run(process.execPath, args);
    const seeds = readFileSync(join(dir, "nats-seeds.env"), "utf8");
    expect(
      seeds
        .trim()
        .split("\n")
        .map((l) => l.split("=")[0]),
    ).toEqual(["orchestrator", "policy", "executor", "audit", "subscriber", "operator"].map((r) => `TOOLGATE_NATS_SEED_${r.toUpperCase()}`));
    expect(statSync(join(dir, "nats-seeds.env")).mode & 0o077).toBe(0);
    const conf = readFileSync(join(dir, "nats-auth.conf"), "utf8");
    for (const line of seeds.trim().split("\n")) expect(conf).not.toContain(line.split("=")[1]);
    const checked = await run(`${REPO_ROOT}infra/.bin/nats-server`, ["-t", "-c", join(dir, "nats-auth.conf")], {
      env: { TOOLGATE_NATS_NAME: "t", TOOLGATE_NATS_LISTEN: "127.0.0.1:1", TOOLGATE_NATS_HTTP: "127.0.0.1:2", TOOLGATE_NATS_STORE_DIR: dir },
    });
    expect(checked.stdout + checked.stderr).toMatch(/configuration file .* is valid/);
    const again = await run(process.execPath, args).catch((e: { code: number; stderr: string }) => e);
    expect(again).toMatchObject({ code: 1 });
    expect(readFileSync(join(dir, "nats-seeds.env"), "utf8")).toBe(seeds);
  });
});
