import { randomBytes } from "node:crypto";
import type { CallId, Principal, RunContext, RunId } from "@toolgate/contracts";
import type { Logger } from "@toolgate/telemetry";
import type { Collection, Db } from "mongodb";

/** The MCP log levels, least severe first (RFC 5424 names, as the protocol has them). */
export const MCP_LOG_LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"] as const;
export type McpLogLevel = (typeof MCP_LOG_LEVELS)[number];

/**
 * An MCP session: what a client's `initialize` chose (its run and the run's context), what the client said it
 * supports, and its log level. Any orchestrator replica can serve it: the id in `Mcp-Session-Id` names this record.
 */
export interface McpSession {
  _id: string;
  tenant: string;
  subject: string;
  run_id: RunId;
  context: RunContext;
  client_capabilities: Record<string, unknown>;
  protocol_version: string;
  log_level?: McpLogLevel;
  created_at: Date;
  expires_at: Date;
}

/** A task-augmented `tools/call`: its task id is the call's id, bound to the session (or principal) that made it. */
export interface McpTask {
  _id: CallId;
  session_id: string | null;
  tenant: string;
  subject: string;
  created_at: Date;
  ttl_ms: number;
  /** `created_at` + `ttl_ms`: when the task is forgotten (the purge's index). */
  expires_at: Date;
  cancelled_at?: Date;
}

/** The longest a task may live (and the age past which a record from before `expires_at` was kept is purged). */
export const MAX_TASK_TTL_MS = 24 * 3_600_000;

/** How long a replica serves a session from memory before reading it again (a session ended on another replica). */
const REVALIDATE_MS = 1_000;

/** Most sessions a replica remembers; older ones are read again from the store. */
const REMEMBERED = 10_000;

/**
 * Stores MCP sessions and tasks (collections `mcp_sessions`, `mcp_tasks`); reads are by `_id` only. With
 * `purgeMs`, deletes the sessions and tasks past their expiry that often (FerretDB has no TTL index).
 */
export class McpSessions {
  readonly #sessions: Collection<McpSession>;
  readonly #tasks: Collection<McpTask>;
  readonly #ttlMs: number;
  readonly #now: () => number;
  readonly #remembered = new Map<string, { session: McpSession; checkedAt: number }>();
  readonly #purge: NodeJS.Timeout | undefined;

  constructor(db: Db, options: { ttlMs: number; now?: () => number; purgeMs?: number; logger?: Logger }) {
    this.#sessions = db.collection<McpSession>("mcp_sessions");
    this.#tasks = db.collection<McpTask>("mcp_tasks");
    this.#ttlMs = options.ttlMs;
    this.#now = options.now ?? Date.now;
    if (options.purgeMs !== undefined) {
      this.#purge = setInterval(() => {
        this.purge().catch((error: unknown) => options.logger?.warn({ err: error }, "MCP session purge failed; retried later"));
      }, options.purgeMs);
      this.#purge.unref();
    }
  }

  /** Creates the indexes the purge and `tasks/list` use. */
  async ensureIndexes(): Promise<void> {
    await this.#sessions.createIndex({ expires_at: 1 });
    await this.#tasks.createIndex({ session_id: 1 });
    await this.#tasks.createIndex({ expires_at: 1 });
  }

  /** Stops the periodic purge. */
  close(): void {
    clearInterval(this.#purge);
  }

  /** Starts a session for `principal` (an insert; the id is 192 random bits). */
  async start(
    principal: Principal,
    fields: { runId: RunId; context: RunContext; clientCapabilities: Record<string, unknown>; protocolVersion: string },
  ): Promise<McpSession> {
    const now = this.#now();
    const session: McpSession = {
      _id: `mcps_${randomBytes(24).toString("base64url")}`,
      tenant: principal.tenant,
      subject: principal.subject,
      run_id: fields.runId,
      context: fields.context,
      client_capabilities: fields.clientCapabilities,
      protocol_version: fields.protocolVersion,
      created_at: new Date(now),
      expires_at: new Date(now + this.#ttlMs),
    };
    await this.#sessions.insertOne(session);
    this.#remember(session);
    return session;
  }

  /** The session `id` of `principal`, or undefined (unknown, expired, or another principal's). */
  async get(id: string, principal: Principal): Promise<McpSession | undefined> {
    const now = this.#now();
    const remembered = this.#remembered.get(id);
    const fresh = remembered !== undefined && now - remembered.checkedAt < REVALIDATE_MS;
    const session = fresh ? remembered.session : ((await this.#sessions.findOne({ _id: id })) ?? undefined);
    if (!session) {
      this.#remembered.delete(id);
      return undefined;
    }
    if (session.tenant !== principal.tenant || session.subject !== principal.subject) return undefined;
    if (session.expires_at.getTime() <= now) return undefined;
    if (!fresh) this.#remember(session);
    return session;
  }

  /** Ends a session (`DELETE /mcp`): it and its tasks are deleted; its id is unknown from then on, on every replica within a second. */
  async end(session: McpSession): Promise<void> {
    this.#remembered.delete(session._id);
    await this.#sessions.deleteOne({ _id: session._id });
    await this.#tasks.deleteMany({ session_id: session._id });
  }

  /** Records the session's log level (`logging/setLevel`). */
  async setLogLevel(session: McpSession, level: McpLogLevel): Promise<void> {
    await this.#sessions.updateOne({ _id: session._id }, { $set: { log_level: level } });
    this.#remember({ ...session, log_level: level });
  }

  /** Records a task; a second record of the same call (a retried task-augmented call) keeps the first. */
  async recordTask(task: McpTask): Promise<McpTask> {
    try {
      await this.#tasks.insertOne(task);
      return task;
    } catch (error) {
      if ((error as { code?: number }).code !== 11000) throw error;
      return (await this.#tasks.findOne({ _id: task._id })) ?? task;
    }
  }

  /** The task `callId` as its session (or, without one, its principal) sees it; undefined for anyone else. */
  async task(callId: string, principal: Principal, session: McpSession | undefined): Promise<McpTask | undefined> {
    const task = await this.#tasks.findOne({ _id: callId });
    if (!task || task.tenant !== principal.tenant || task.subject !== principal.subject) return undefined;
    if (task.session_id !== (session?._id ?? null)) return undefined;
    return task;
  }

  /** The tasks of a session (or of a principal's session-less calls), oldest first. */
  async tasksOf(principal: Principal, session: McpSession | undefined, limit: number): Promise<McpTask[]> {
    return this.#tasks
      .find({ session_id: session?._id ?? null, tenant: principal.tenant, subject: principal.subject })
      .sort({ created_at: 1 })
      .limit(limit)
      .toArray();
  }

  /** Marks a task cancelled (it stays cancelled whatever its call does next). */
  async cancelTask(task: McpTask): Promise<McpTask> {
    const cancelled = { ...task, cancelled_at: new Date(this.#now()) };
    await this.#tasks.updateOne({ _id: task._id }, { $set: { cancelled_at: cancelled.cancelled_at } });
    return cancelled;
  }

  /** Deletes the sessions and tasks past their expiry; returns how many of each. */
  async purge(): Promise<{ sessions: number; tasks: number }> {
    const now = new Date(this.#now());
    const sessions = await this.#sessions.deleteMany({ expires_at: { $lte: now } });
    const tasks = await this.#tasks.deleteMany({ expires_at: { $lte: now } });
    // Tasks recorded before they carried an expiry: none lives longer than the longest TTL.
    const unmarked = await this.#tasks.deleteMany({ expires_at: { $exists: false }, created_at: { $lte: new Date(now.getTime() - MAX_TASK_TTL_MS) } });
    return { sessions: sessions.deletedCount, tasks: tasks.deletedCount + unmarked.deletedCount };
  }

  #remember(session: McpSession): void {
    this.#remembered.delete(session._id);
    this.#remembered.set(session._id, { session, checkedAt: this.#now() });
    if (this.#remembered.size > REMEMBERED) this.#remembered.delete(this.#remembered.keys().next().value!);
  }
}
