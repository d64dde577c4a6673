import { canonicalJson, HashSchema, sha256, type ToolRef } from "@toolgate/contracts";
import { z } from "zod";
import { ToolContractSchema, type ToolContractInput } from "./contract.js";
import { definitionHashOf } from "./definition-hash.js";
import { ContractCompiler, ContractError, ToolRegistry, type CompiledTool } from "./registry.js";
import { parseStrictJson } from "./strict-json.js";

/**
 * The part of a NATS connection the catalog uses (`NatsConnection` from `@nats-io/nats-core` fits it): requests
 * to the JetStream API and to stream subjects, and one subscription that hears new contracts being published.
 */
export interface CatalogConnection {
  request(subject: string, payload?: string | Uint8Array, options?: { timeout: number }): Promise<{ data: Uint8Array }>;
  subscribe(subject: string, options?: { callback?: (error: Error | null, message: { subject: string }) => void }): { unsubscribe(): void };
}

export interface ContractCatalogOptions {
  /** JetStream stream holding every published contract version; default `TOOLGATE_CONTRACTS`. */
  stream?: string;
  /** Subject prefix; a version is stored at `<prefix>.<tool name>.<sha256 hex>`. Default `toolgate.contracts`. */
  subjectPrefix?: string;
  /** Stream replicas when the catalog creates the stream (3 in production). Default 1. */
  replicas?: number;
  /** Timeout of each request to the server. Default 5 s. */
  requestTimeoutMs?: number;
  /** Re-reads the stream this often, in case a change notification was missed (0 disables). Default 30 s. */
  resyncIntervalMs?: number;
  /** Called for a stored entry that is refused (bad JSON, hash mismatch, invalid contract); default: ignored. */
  onRejected?: (rejection: CatalogRejection) => void;
}

/** A stored entry the catalog refused to load. */
export interface CatalogRejection {
  subject: string;
  seq: number;
  reason: string;
}

/**
 * A contract version the catalog learned about; `current` when it became the tool's current version in
 * {@link ContractCatalog.registry}. `quarantined` when it is held back until its definition is approved (the tool
 * then has no current version); `released` when an approval just made it current.
 */
export interface CatalogChange {
  ref: ToolRef;
  current: boolean;
  /** The version it replaced as current, if any. */
  previous?: ToolRef;
  quarantined?: true;
  released?: true;
}

/** Outcome of {@link ContractCatalog.publish}. */
export type PublishOutcome = { ok: true; ref: ToolRef; created: boolean } | { ok: false; code: "INVALID_CONTRACT" | "VERSION_CONFLICT"; message: string };

/** Why a definition is quarantined: a linter finding (rule, JSON pointer into the contract, message). */
export interface QuarantineReason {
  rule: string;
  pointer: string;
  message: string;
}

/** Asks {@link ContractCatalog.publish} to store the version as quarantined, with the reasons. */
export interface QuarantineRequest {
  reasons: readonly QuarantineReason[];
  /** Where the definition came from (e.g. `mcp:files`), for the people who review it. */
  source?: string;
}

/** One quarantined contract version, as {@link ContractCatalog.quarantined} lists it. */
export interface QuarantineEntry {
  ref: ToolRef;
  /** The hash an approval must name (see `definitionHashOf`). */
  definition_hash: string;
  reasons: QuarantineReason[];
  source?: string;
  quarantined_at: string;
  /** Present once someone approved exactly this definition: the version is no longer held back. */
  approval?: { approved_by: string; approved_at: string };
}

/** Outcome of {@link ContractCatalog.approveDefinition}. `released` lists the versions the approval lets through. */
export type ApproveOutcome = { ok: true; created: boolean; released: ToolRef[] } | { ok: false; code: "NOT_QUARANTINED"; message: string };

const ReasonSchema = z.object({ rule: z.string().max(64), pointer: z.string().max(1_024), message: z.string().max(2_048) });
const QuarantineRecordSchema = z.object({
  kind: z.literal("quarantine"),
  tool: z.string(),
  hash: HashSchema,
  definition_hash: HashSchema,
  reasons: z.array(ReasonSchema).max(100),
  source: z.string().max(256).optional(),
  at: z.string().max(64),
});
const ApprovalRecordSchema = z.object({
  kind: z.literal("approval"),
  tool: z.string(),
  definition_hash: HashSchema,
  approved_by: z.string().min(1).max(256),
  at: z.string().max(64),
});
type QuarantineRecord = z.infer<typeof QuarantineRecordSchema>;
type ApprovalRecord = z.infer<typeof ApprovalRecordSchema>;

/** The catalog's server could not be reached or answered with an error. Retryable: the caller may try again. */
export class CatalogError extends Error {
  readonly code = "CATALOG_UNAVAILABLE";
  readonly retryable = true;
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "CatalogError";
  }
}

interface StoredVersion {
  tool: CompiledTool;
  seq: number;
}

const decoder = new TextDecoder();
const SEMVER = /^(\d+)\.(\d+)\.(\d+)$/;

/**
 * Every contract version ever published, distributed through a JetStream stream (one message per version,
 * addressed by content hash; delete and purge denied). Each service keeps a {@link ToolRegistry} whose current
 * version of a tool is its highest published semantic version, and in which every older version stays
 * addressable by hash, so a call validated against hash H is checked and executed against exactly H.
 * New versions reach every replica through a subscription, without a restart.
 *
 * A version published as quarantined (an untrusted definition the linter flagged) is stored with its reasons but
 * held back: it is never a current version, so no model is offered it and no call reaches it by name, until
 * someone approves exactly its definition hash. Quarantine records and approvals live in the same stream.
 */
export class ContractCatalog {
  readonly #nc: CatalogConnection;
  readonly #stream: string;
  readonly #prefix: string;
  readonly #timeout: number;
  readonly #onRejected: (rejection: CatalogRejection) => void;
  readonly #compiler = new ContractCompiler();
  /** Every loaded version by its registry hash. */
  readonly #versions = new Map<string, StoredVersion>();
  /** Current version per tool name. */
  readonly #current = new Map<string, StoredVersion>();
  readonly #listeners = new Set<(change: CatalogChange) => void>();
  /** Quarantine records by the contract hash they hold back. */
  readonly #quarantines = new Map<string, QuarantineRecord>();
  /** Approvals by `<tool> <definition hash>`. */
  readonly #approvals = new Map<string, ApprovalRecord>();
  /** Changes loaded by the running read, announced once the registry holds them. */
  readonly #pendingChanges: CatalogChange[] = [];
  #registry: ToolRegistry = ToolRegistry.fromCompiled([]);
  #lastSeq = 0;
  #running: Promise<number> | undefined;
  #again: Promise<number> | undefined;
  #subscription: { unsubscribe(): void } | undefined;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;

  private constructor(nc: CatalogConnection, options: ContractCatalogOptions) {
    this.#nc = nc;
    this.#stream = options.stream ?? "TOOLGATE_CONTRACTS";
    this.#prefix = options.subjectPrefix ?? "toolgate.contracts";
    this.#timeout = options.requestTimeoutMs ?? 5_000;
    this.#onRejected = options.onRejected ?? (() => undefined);
  }

  /**
   * Ensures the stream exists, loads every stored version and starts following new ones. Throws
   * {@link CatalogError} when the server cannot be reached or the stream exists with an incompatible configuration.
   */
  static async connect(nc: CatalogConnection, options: ContractCatalogOptions = {}): Promise<ContractCatalog> {
    const catalog = new ContractCatalog(nc, options);
    await catalog.#ensureStream(options.replicas ?? 1);
    // Subscribe before the first read so that nothing published in between is missed.
    catalog.#subscription = nc.subscribe(`${catalog.#prefix}.>`, { callback: () => catalog.#notified() });
    await catalog.refresh();
    const interval = options.resyncIntervalMs ?? 30_000;
    if (interval > 0) {
      catalog.#timer = setInterval(() => catalog.refresh().catch(() => undefined), interval);
      catalog.#timer.unref();
    }
    return catalog;
  }

  /**
   * The current registry: the highest version of each tool (enabled or not) by name, every other version by hash.
   * A tool whose highest version is quarantined has no current version until that version is approved.
   */
  registry(): ToolRegistry {
    return this.#registry;
  }

  /** Every loaded version of the tool called `name`, quarantined or not, lowest semantic version first. */
  versionsOf(name: string): CompiledTool[] {
    return [...this.#versions.values()]
      .filter((v) => v.tool.ref.name === name)
      .sort((a, b) => (newer(a, b) ? 1 : -1))
      .map((v) => v.tool);
  }

  /** What may be offered to a model: the current version of every enabled tool, never a quarantined one. */
  offeredTools(): CompiledTool[] {
    return this.#registry.list().filter((tool) => tool.contract.enabled && !this.isQuarantined(tool.hash));
  }

  /** Whether the version with this content hash is held back: quarantined and its definition not approved. */
  isQuarantined(hash: string): boolean {
    const record = this.#quarantines.get(hash);
    return record !== undefined && !this.#approvals.has(approvalKey(record.tool, record.definition_hash));
  }

  /** Every version ever quarantined, approved or not, oldest first. */
  quarantined(): QuarantineEntry[] {
    return [...this.#quarantines.values()].map((record) => {
      const tool = this.#versions.get(record.hash)?.tool;
      const approval = this.#approvals.get(approvalKey(record.tool, record.definition_hash));
      return {
        ref: tool?.ref ?? { name: record.tool, version: "?", hash: record.hash },
        definition_hash: record.definition_hash,
        reasons: record.reasons,
        ...(record.source !== undefined ? { source: record.source } : {}),
        quarantined_at: record.at,
        ...(approval ? { approval: { approved_by: approval.approved_by, approved_at: approval.at } } : {}),
      };
    });
  }

  /**
   * Approves one definition of one tool: every quarantined version of `name` whose definition hash is exactly
   * `definitionHash` is released, on every replica. Any other definition (a changed one) stays or becomes
   * quarantined. NOT_QUARANTINED when no such version is held back. Throws {@link CatalogError} as `publish` does.
   */
  async approveDefinition(name: string, definitionHash: string, approvedBy: string): Promise<ApproveOutcome> {
    await this.refresh();
    const held = [...this.#quarantines.values()].filter((r) => r.tool === name && r.definition_hash === definitionHash);
    if (held.length === 0) return { ok: false, code: "NOT_QUARANTINED", message: `no version of ${name} with definition ${definitionHash} is quarantined` };
    const released = held.map((r) => this.#versions.get(r.hash)?.tool.ref).filter((ref): ref is ToolRef => ref !== undefined);
    if (this.#approvals.has(approvalKey(name, definitionHash))) return { ok: true, created: false, released };
    const record: ApprovalRecord = { kind: "approval", tool: name, definition_hash: definitionHash, approved_by: approvedBy, at: new Date().toISOString() };
    await this.#store(`${this.#prefix}.approval.${name}.${hexOf(definitionHash)}`, JSON.stringify(record), `the approval of ${name}`);
    return { ok: true, created: true, released };
  }

  /** The version with this content hash, if this replica has loaded it. */
  get(hash: string): CompiledTool | undefined {
    return this.#versions.get(hash)?.tool;
  }

  /**
   * The version with this content hash, reading the stream first when this replica has not loaded it yet
   * (a version published a moment ago). Undefined means no such version was ever published: refuse the call.
   */
  async resolve(hash: string): Promise<CompiledTool | undefined> {
    return this.get(hash) ?? (await this.refresh(), this.get(hash));
  }

  /** Calls `listener` for every version loaded from now on; returns a function that stops the calls. */
  onChange(listener: (change: CatalogChange) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * Publishes a contract version. Publishing the same content again is a no-op (`created: false`); a name and
   * version already published with different content is VERSION_CONFLICT (publish a new version instead).
   * With `quarantine`, the version is stored as quarantined (its record is written before the contract, so no
   * replica ever sees it unquarantined). Resolves once this replica has loaded it. Throws {@link CatalogError}
   * when the server does not store it.
   */
  async publish(input: ToolContractInput, quarantine?: QuarantineRequest): Promise<PublishOutcome> {
    let tool: CompiledTool;
    try {
      tool = this.#compiler.compile(input);
    } catch (error) {
      return { ok: false, code: "INVALID_CONTRACT", message: (error as Error).message };
    }
    await this.refresh();
    const quarantineFirst = quarantine !== undefined && !this.#quarantines.has(tool.hash);
    if (this.#versions.has(tool.hash) && !quarantineFirst) return { ok: true, ref: tool.ref, created: false };
    const clash = [...this.#versions.values()].find(
      (v) => v.tool.ref.name === tool.ref.name && v.tool.ref.version === tool.ref.version && v.tool.hash !== tool.hash,
    );
    if (clash) {
      return {
        ok: false,
        code: "VERSION_CONFLICT",
        message: `${tool.ref.name}@${tool.ref.version} was already published with different content (${clash.tool.hash}); publish a new version`,
      };
    }
    const what = `${tool.ref.name}@${tool.ref.version}`;
    if (quarantineFirst) {
      const record: QuarantineRecord = {
        kind: "quarantine",
        tool: tool.ref.name,
        hash: tool.hash,
        definition_hash: definitionHashOf(tool.contract),
        reasons: quarantine.reasons
          .slice(0, 100)
          .map((r) => ({ rule: r.rule.slice(0, 64), pointer: r.pointer.slice(0, 1_024), message: r.message.slice(0, 2_048) })),
        ...(quarantine.source !== undefined ? { source: quarantine.source.slice(0, 256) } : {}),
        at: new Date().toISOString(),
      };
      await this.#store(`${this.#prefix}.quarantine.${tool.ref.name}.${hexOf(tool.hash)}`, JSON.stringify(record), `the quarantine of ${what}`);
      if (this.#versions.has(tool.hash)) return { ok: true, ref: tool.ref, created: false };
    }
    const document = canonicalJson(tool.contract);
    await this.#store(`${this.#prefix}.${tool.ref.name}.${hexOf(sha256(document))}`, document, what);
    return { ok: true, ref: tool.ref, created: true };
  }

  /** Stores one entry and resolves once this replica has read it back. */
  async #store(subject: string, payload: string, what: string): Promise<void> {
    const ack = await this.#json(subject, payload);
    if (typeof ack.seq !== "number") throw new CatalogError(`the stream did not store ${what}: ${JSON.stringify(ack).slice(0, 300)}`);
    while (this.#lastSeq < ack.seq) {
      if ((await this.refresh()) === 0 && this.#lastSeq < ack.seq) throw new CatalogError(`stored ${what} at ${ack.seq} but could not read it back`);
    }
  }

  /**
   * Reads every entry stored after the last one seen; resolves with how many were read. A call made while a read
   * is running waits for it and then reads once more (shared by every such call), so it sees what was stored
   * before it was made. Throws {@link CatalogError} when the server cannot be read.
   */
  refresh(): Promise<number> {
    if (this.#again) return this.#again;
    if (!this.#running) return this.#startRead();
    const again = this.#running
      .catch(() => 0)
      .then(() => {
        this.#again = undefined;
        return this.#startRead();
      });
    this.#again = again;
    return again;
  }

  /** Stops following the stream; the registry keeps what was loaded. */
  close(): void {
    this.#closed = true;
    this.#subscription?.unsubscribe();
    clearInterval(this.#timer);
  }

  #startRead(): Promise<number> {
    const read = this.#readNew().finally(() => {
      if (this.#running === read) this.#running = undefined;
    });
    this.#running = read;
    return read;
  }

  async #readNew(): Promise<number> {
    let read = 0;
    for (;;) {
      const reply = await this.#json(`$JS.API.STREAM.MSG.GET.${this.#stream}`, JSON.stringify({ seq: this.#lastSeq + 1, next_by_subj: `${this.#prefix}.>` }));
      if (isApiError(reply) && reply.error.code === 404) break;
      const message = (reply as { message?: { subject?: unknown; seq?: unknown; data?: unknown } }).message;
      if (!message || typeof message.seq !== "number" || typeof message.subject !== "string") {
        throw new CatalogError(`unexpected reply from ${this.#stream}: ${JSON.stringify(reply).slice(0, 300)}`);
      }
      this.#lastSeq = message.seq;
      read++;
      this.#load(message.subject, message.seq, typeof message.data === "string" ? Buffer.from(message.data, "base64").toString("utf8") : "");
    }
    if (read > 0) this.#registry = this.#snapshot();
    // Listeners hear of a version once registry() already holds it.
    const changes = this.#pendingChanges.splice(0);
    for (const change of changes) {
      for (const listener of this.#listeners) {
        try {
          listener(change);
        } catch {
          // A listener's failure is its own; the catalog keeps loading.
        }
      }
    }
    return read;
  }

  /** Verifies and loads one stored entry: its subject must name the contract and the hash of exactly its content. */
  #load(subject: string, seq: number, text: string): void {
    const reject = (reason: string) => this.#onRejected({ subject, seq, reason });
    const tokens = subject.slice(this.#prefix.length + 1).split(".");
    if (tokens.length === 3) return this.#loadRecord(tokens, text, reject);
    const [name, hex] = tokens;
    if (tokens.length !== 2 || name === undefined || hex === undefined) return reject("subject is not <prefix>.<name>.<hash>");
    const parsed = parseStrictJson(text, { maxDepth: 64 });
    if (!parsed.ok) return reject(`not JSON: ${parsed.error.message}`);
    let document: string;
    try {
      document = canonicalJson(parsed.value);
    } catch {
      return reject("no canonical form");
    }
    if (hexOf(sha256(document)) !== hex) return reject("content does not match the hash in its subject");
    const contract = ToolContractSchema.safeParse(parsed.value);
    if (!contract.success || contract.data.name !== name) return reject("not a contract for the tool its subject names");
    let tool: CompiledTool;
    try {
      tool = this.#compiler.compile(contract.data);
    } catch (error) {
      return reject((error as Error).message);
    }
    if (this.#versions.has(tool.hash)) return;
    const stored = { tool, seq };
    this.#versions.set(tool.hash, stored);
    const previous = this.#current.get(name);
    const highest = previous === undefined || newer(stored, previous);
    if (highest) this.#current.set(name, stored);
    if (this.isQuarantined(tool.hash)) this.#pendingChanges.push({ ref: tool.ref, current: false, quarantined: true });
    else {
      const shown = previous && !this.isQuarantined(previous.tool.hash) ? previous.tool.ref : undefined;
      this.#pendingChanges.push({ ref: tool.ref, current: highest, ...(highest && shown ? { previous: shown } : {}) });
    }
  }

  /** A quarantine record (`<prefix>.quarantine.<name>.<contract hash>`) or an approval (`<prefix>.approval.<name>.<definition hash>`). */
  #loadRecord(tokens: readonly string[], text: string, reject: (reason: string) => void): void {
    const [kind, name, hex] = tokens as [string, string, string];
    const parsed = parseStrictJson(text, { maxDepth: 8 });
    if (!parsed.ok) return reject(`not JSON: ${parsed.error.message}`);
    if (kind === "quarantine") {
      const record = QuarantineRecordSchema.safeParse(parsed.value);
      if (!record.success || record.data.tool !== name || hexOf(record.data.hash) !== hex)
        return reject("not a quarantine record of the version its subject names");
      const wasHeld = this.isQuarantined(record.data.hash);
      this.#quarantines.set(record.data.hash, record.data);
      const loaded = this.#versions.get(record.data.hash);
      if (loaded && !wasHeld && this.isQuarantined(loaded.tool.hash)) this.#pendingChanges.push({ ref: loaded.tool.ref, current: false, quarantined: true });
      return;
    }
    if (kind === "approval") {
      const record = ApprovalRecordSchema.safeParse(parsed.value);
      if (!record.success || record.data.tool !== name || hexOf(record.data.definition_hash) !== hex)
        return reject("not an approval of the definition its subject names");
      const key = approvalKey(name, record.data.definition_hash);
      const first = !this.#approvals.has(key);
      this.#approvals.set(key, record.data);
      if (!first) return;
      for (const held of this.#quarantines.values()) {
        if (held.tool !== name || held.definition_hash !== record.data.definition_hash) continue;
        const loaded = this.#versions.get(held.hash);
        if (loaded) this.#pendingChanges.push({ ref: loaded.tool.ref, current: this.#current.get(name) === loaded, released: true });
      }
      return;
    }
    reject("subject is not <prefix>.<name>.<hash>, <prefix>.quarantine.<name>.<hash> or <prefix>.approval.<name>.<hash>");
  }

  #snapshot(): ToolRegistry {
    const current = [...this.#current.values()]
      .map((v) => v.tool)
      .filter((t) => !this.isQuarantined(t.hash))
      .sort((a, b) => a.ref.name.localeCompare(b.ref.name));
    const currentHashes = new Set(current.map((t) => t.hash));
    const retained = [...this.#versions.values()].map((v) => v.tool).filter((t) => !currentHashes.has(t.hash));
    return ToolRegistry.fromCompiled(current, retained);
  }

  /** A published message may be heard before the stream has stored it: read until it shows up, a few times. */
  #notified(): void {
    if (this.#closed) return;
    void (async () => {
      for (const delay of [0, 25, 100, 400, 1_600]) {
        if (delay > 0) await new Promise((resolve) => setTimeout(resolve, delay));
        if (this.#closed) return;
        const read = await this.refresh().catch(() => 0);
        if (read > 0) return;
      }
    })();
  }

  async #ensureStream(replicas: number): Promise<void> {
    const config = {
      name: this.#stream,
      subjects: [`${this.#prefix}.>`],
      retention: "limits",
      max_msgs_per_subject: 1,
      max_msg_size: 1024 * 1024,
      discard: "old",
      storage: "file",
      num_replicas: replicas,
      deny_delete: true,
      deny_purge: true,
    };
    const info = await this.#json(`$JS.API.STREAM.INFO.${this.#stream}`, "");
    if (isApiError(info)) {
      if (info.error.err_code !== 10059) throw new CatalogError(`cannot read stream ${this.#stream}: ${info.error.description}`);
      const created = await this.#json(`$JS.API.STREAM.CREATE.${this.#stream}`, JSON.stringify(config));
      // A replica that lost the creation race finds the same configuration, which is not an error.
      if (isApiError(created) && created.error.err_code !== 10058) throw new CatalogError(`cannot create stream ${this.#stream}: ${created.error.description}`);
      if (!isApiError(created)) return;
      return this.#ensureStream(replicas);
    }
    const existing = (info as { config?: { subjects?: unknown; max_msgs_per_subject?: unknown } }).config;
    const subjects = Array.isArray(existing?.subjects) ? existing.subjects : [];
    if (!subjects.includes(`${this.#prefix}.>`) || existing?.max_msgs_per_subject !== 1) {
      throw new CatalogError(`stream ${this.#stream} exists but does not hold ${this.#prefix}.> with one message per subject`);
    }
  }

  async #json(subject: string, payload: string): Promise<Record<string, unknown>> {
    let reply: { data: Uint8Array };
    try {
      reply = await this.#nc.request(subject, payload, { timeout: this.#timeout });
    } catch (error) {
      throw new CatalogError(`request to ${subject} failed: ${(error as Error).message}`, { cause: error });
    }
    try {
      return JSON.parse(decoder.decode(reply.data)) as Record<string, unknown>;
    } catch (error) {
      throw new CatalogError(`reply from ${subject} is not JSON`, { cause: error });
    }
  }
}

function isApiError(reply: Record<string, unknown>): reply is { error: { code: number; err_code: number; description: string } } {
  const error = reply.error as { code?: unknown } | undefined;
  return typeof error === "object" && error !== null && typeof error.code === "number";
}

function approvalKey(tool: string, definitionHash: string): string {
  return `${tool} ${definitionHash}`;
}

function hexOf(hash: string): string {
  return hash.slice("sha256:".length);
}

/** Higher semantic version wins; for one version published twice with different content, the first stored wins. */
function newer(candidate: StoredVersion, current: StoredVersion): boolean {
  const a = SEMVER.exec(candidate.tool.ref.version);
  const b = SEMVER.exec(current.tool.ref.version);
  if (!a || !b) throw new ContractError("contract versions are validated as semantic versions");
  for (let i = 1; i <= 3; i++) {
    const diff = Number(a[i]) - Number(b[i]);
    if (diff !== 0) return diff > 0;
  }
  return candidate.seq < current.seq;
}
