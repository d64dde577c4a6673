import type { Principal } from "@toolgate/contracts";
import { testDatabase } from "@toolgate/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_TASK_TTL_MS, McpSessions, type McpSession, type McpTask } from "./mcp-sessions.js";

// Sessions and tasks against the real store, on a clock the test moves.
const TTL_MS = 60_000;
const alice: Principal = { tenant: "acme", subject: "alice", roles: [] };
let database: Awaited<ReturnType<typeof testDatabase>>;
let clock = Date.parse("2026-03-04T10:00:00Z");
let sessions: McpSessions;
/** A second replica: its own memory of sessions, the same store. */
let other: McpSessions;

beforeAll(async () => {
  database = await testDatabase("tg_mcps_");
  sessions = new McpSessions(database.db, { ttlMs: TTL_MS, now: () => clock });
  other = new McpSessions(database.db, { ttlMs: TTL_MS, now: () => clock });
  await sessions.ensureIndexes();
});
afterAll(async () => {
  sessions.close();
  other.close();
  await database.dispose();
});

const start = () => sessions.start(alice, { runId: "run_1", context: {}, clientCapabilities: {}, protocolVersion: "2025-11-25" });
const task = (session: McpSession | null, id: string, ttlMs: number): McpTask => ({
  _id: id,
  session_id: session?._id ?? null,
  tenant: alice.tenant,
  subject: alice.subject,
  created_at: new Date(clock),
  ttl_ms: ttlMs,
  expires_at: new Date(clock + ttlMs),
});
const stored = async () => ({
  sessions: (
    await database.db
      .collection("mcp_sessions")
      .find({}, { projection: { _id: 1 } })
      .toArray()
  ).map((d) => d._id),
  tasks: (
    await database.db
      .collection("mcp_tasks")
      .find({}, { projection: { _id: 1 } })
      .toArray()
  )
    .map((d) => d._id)
    .sort(),
});

describe("McpSessions", () => {
  it("purges the sessions and tasks past their expiry, and only those", async () => {
    const old = await start();
    await sessions.recordTask(task(old, "call_short", 5_000));
    await sessions.recordTask(task(null, "call_long", TTL_MS * 2));
    // A record from before tasks carried an expiry, older than any task may live.
    const { expires_at: _, ...unmarked } = task(null, "call_unmarked", 1_000);
    await database.db.collection("mcp_tasks").insertOne({ ...unmarked, created_at: new Date(clock - MAX_TASK_TTL_MS - 1) } as never);
    clock += 5_000;
    const young = await start();

    expect(await sessions.purge()).toEqual({ sessions: 0, tasks: 2 });
    expect(await stored()).toEqual({ sessions: [old._id, young._id], tasks: ["call_long"] });

    clock += TTL_MS - 5_000;
    expect(await sessions.purge()).toEqual({ sessions: 1, tasks: 0 });
    expect(await stored()).toEqual({ sessions: [young._id], tasks: ["call_long"] });
    expect(await sessions.get(old._id, alice)).toBeUndefined();
    expect((await sessions.get(young._id, alice))?._id).toBe(young._id);

    clock += TTL_MS * 2;
    expect(await sessions.purge()).toEqual({ sessions: 1, tasks: 1 });
    expect(await stored()).toEqual({ sessions: [], tasks: [] });
  });

  it("ends a session with its tasks: unknown at once here, and on another replica once its memory is a second old", async () => {
    const session = await start();
    await sessions.recordTask(task(session, "call_of_session", TTL_MS));
    await sessions.recordTask(task(null, "call_without_session", TTL_MS));
    expect((await other.get(session._id, alice))?._id).toBe(session._id);

    await sessions.end(session);
    expect(await sessions.get(session._id, alice)).toBeUndefined();
    expect(await sessions.task("call_of_session", alice, session)).toBeUndefined();
    expect((await stored()).tasks).toEqual(["call_without_session"]);
    // The other replica remembered it a moment ago; it reads the store again after a second.
    clock += 1_000;
    expect(await other.get(session._id, alice)).toBeUndefined();
  });
});
