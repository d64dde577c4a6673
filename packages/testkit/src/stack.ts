import { generateKeyPairSync, randomBytes, type KeyObject } from "node:crypto";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseNatsSeeds, seedAuthenticator, type NatsRole } from "@toolgate/bus";
import { decisionSigner, EVENT_SIGNATURE_HEADER, eventSigner, messageDigest, type DecisionSigner, type EventSigner } from "@toolgate/contracts";
import { jetstream, jetstreamManager, type PubAck } from "@nats-io/jetstream";
import { headers as natsHeaders, type NatsConnection } from "@nats-io/nats-core";
import { ContractCatalog, type ToolContractInput } from "@toolgate/registry";
import { toolsetContracts, ToolsetNameSchema } from "@toolgate/toolsets";
import { connect } from "@nats-io/transport-node";
import { SignJWT } from "jose";
import { REPO_ROOT, ServiceProcess, type ServiceName } from "./service-process.js";
import { waitFor } from "./wait-for.js";

/** The services that publish events, each with its own signing key. */
const SIGNING_SERVICES = ["orchestrator", "policy", "executor"] as const;
export type SigningService = (typeof SIGNING_SERVICES)[number];

/** A run as the orchestrator's API returns it. */
export interface RunView {
  run_id: string;
  status: "running" | "completed" | "stopped" | "external";
  turn: number;
  final_text?: string;
  stop_reason?: string;
  calls: { call_id: string; provider_call_id: string; tool: string; turn: number; status: string; result?: Record<string, unknown> & { ok: boolean } }[];
}

/** One event as the audit API returns it (the envelope is kept loosely typed: tests assert on it). */
export interface AuditedEvent {
  idx: number;
  stream_seq: number;
  hash: string;
  event: {
    kind: "call" | "run";
    type: string;
    id: string;
    call_id?: string;
    run_id: string;
    seq: number;
    time: string;
    /** The service that published it. */
    source: string;
    tool?: { name: string; version: string; hash: string };
    args_hash?: string;
    payload: Record<string, unknown>;
  };
}

/** A principal as the orchestrator's API-key configuration declares it. */
export interface StackPrincipal {
  tenant: string;
  subject: string;
  roles: string[];
}

export interface StackOptions {
  /** One NATS server URL, or a cluster's, comma-separated (as `NATS_URL` takes them). */
  natsUrl: string;
  mongoUrl: string;
  /** Subject prefix and database-name stem; random by default so stacks never share state. */
  name?: string;
  toolsets?: string[];
  executors?: number;
  /**
   * Files added to (or, with `null`, removed from) the stack's copy of the repository's policy directory
   * (`infra/policy`): Cedar policies, `entities.json`, `quotas.json`. Applied after the stack's defaults.
   */
  policyFiles?: Record<string, string | null>;
  /**
   * Keep the repository's Rule-of-Two policy (a tainted run's writes need approval). Off by default: the C04
   * scenarios save evidence after reading untrusted documents without a human in the loop.
   */
  ruleOfTwo?: boolean;
  /** Extra environment for every service. */
  extraEnv?: Record<string, string>;
  /** Extra environment per service (e.g. fault injection for the executor). */
  env?: Partial<Record<ServiceName, Record<string, string>>>;
  logLevel?: string;
  /** Replicas of the stack's streams (`STREAM_REPLICAS`): 3 on a three-node cluster. Default 1. */
  streamReplicas?: number;
  /**
   * The servers' monitoring URLs (`NATS_MONITOR_URL`), for the start-up guard that checks they sync every
   * write; a cluster needs them. Default: this process's `NATS_MONITOR_URL`, if any.
   */
  natsMonitorUrl?: string;
  /**
   * The NATS identities (nkey seeds by role) the services connect with, and the stack's own connections
   * (publishing contracts, deleting its streams) as `operator`. Default: the `nats-seeds.env` file named by
   * `TOOLGATE_TEST_NATS_SEEDS` (what `./infra/dev.sh up` writes for its server), else anonymous connections.
   */
  natsSeeds?: Partial<Record<NatsRole, string>>;
  /** The CA (a PEM file) of a NATS server that requires TLS: every connection of the stack verifies against it. */
  natsTlsCa?: string;
}

/** The identities of `TOOLGATE_TEST_NATS_SEEDS`, or none. */
function defaultNatsSeeds(): Partial<Record<NatsRole, string>> {
  const file = process.env.TOOLGATE_TEST_NATS_SEEDS;
  return file ? parseNatsSeeds(readFileSync(file, "utf8")) : {};
}

/** The API keys a stack accepts, with the principal each one authenticates. */
export const STACK_USERS = {
  alice: { tenant: "acme", subject: "alice", roles: ["researcher"] },
  bob: { tenant: "acme", subject: "bob", roles: [] },
  /** An approver: may approve other principals' calls through policy's approval API and page. */
  carol: { tenant: "acme", subject: "carol", roles: ["approver"] },
} as const satisfies Record<string, StackPrincipal>;

/** The stack's addition to the repository's policies: as with the grants it replaced, researchers may use every tool. */
const STACK_TOOLS_POLICY = `// Test stacks only: the researcher role may use every tool of the enabled tool sets.
@id("stack-researchers-use-every-tool")
permit (principal in Role::"researcher", action == Action::"call", resource);
`;

/**
 * The four services started as separate OS processes against real NATS and Mongo, wired with fresh keys,
 * a private subject prefix and private databases. Used by the demo, the benchmark and end-to-end tests.
 */
export class Stack {
  /** The stacks started and not yet stopped in this process: what a failed test reports on (see `failure-report`). */
  static readonly live = new Set<Stack>();
  readonly name: string;
  readonly env: Record<string, string>;
  readonly apiKeys: Record<keyof typeof STACK_USERS, string>;
  readonly processes: ServiceProcess[] = [];
  /** The test identity provider's issuer: JWTs it signs authenticate principals of tenant `acme`. */
  readonly jwtIssuer = "https://idp.acme.test";
  /** Signs decisions as this stack's policy service does: for tests and benchmarks that drive executors directly. */
  readonly policySigner: DecisionSigner;
  /**
   * The services' event signing keys: a test publishing an event as the service that owns it (to drive a
   * consumer directly) signs it with {@link signatureFor}; anything else is a forgery every consumer refuses.
   */
  readonly eventSigners: Record<SigningService, EventSigner>;
  /** The policy service's Cedar directory (a private copy: tests may edit it to see policy reload). */
  readonly policyDir: string;
  readonly #idpKey: KeyObject;
  readonly #natsServers: string[];
  readonly #natsSeeds: Partial<Record<NatsRole, string>>;
  readonly #natsTlsCa: string | undefined;
  readonly #streamReplicas: number;
  readonly #toolsets: readonly string[];
  readonly #serviceEnv: Record<ServiceName, Record<string, string>>;

  private constructor(options: StackOptions) {
    this.name = options.name ?? `tg${randomBytes(4).toString("hex")}`;
    this.#natsServers = options.natsUrl.split(",");
    this.#natsSeeds = options.natsSeeds ?? defaultNatsSeeds();
    this.#natsTlsCa = options.natsTlsCa;
    this.#streamReplicas = options.streamReplicas ?? 1;
    this.#toolsets = options.toolsets ?? ["research"];
    const { privateKey, publicKey } = generateKeyPairSync("ed25519");
    this.policySigner = decisionSigner(privateKey.export({ type: "pkcs8", format: "pem" }).toString());
    const idp = generateKeyPairSync("ed25519");
    this.#idpKey = idp.privateKey;
    const eventKeys = Object.fromEntries(SIGNING_SERVICES.map((service) => [service, generateKeyPairSync("ed25519")])) as Record<
      SigningService,
      { privateKey: KeyObject; publicKey: KeyObject }
    >;
    const pkcs8 = (key: KeyObject) => key.export({ type: "pkcs8", format: "der" }).toString("base64");
    this.eventSigners = Object.fromEntries(SIGNING_SERVICES.map((s) => [s, eventSigner(pkcs8(eventKeys[s].privateKey), s)])) as Record<
      SigningService,
      EventSigner
    >;
    const trustedKeys = SIGNING_SERVICES.map((s) => `${s}:${eventKeys[s].publicKey.export({ type: "spki", format: "der" }).toString("base64")}`).join(",");
    const signingKey = (service: SigningService) => ({ EVENT_SIGNING_KEY: pkcs8(eventKeys[service].privateKey) });
    this.apiKeys = {
      alice: `tgk_alice_${randomBytes(12).toString("hex")}`,
      bob: `tgk_bob_${randomBytes(12).toString("hex")}`,
      carol: `tgk_carol_${randomBytes(12).toString("hex")}`,
    };
    this.policyDir = mkdtempSync(join(tmpdir(), `${this.name}-policy-`));
    cpSync(`${REPO_ROOT}infra/policy`, this.policyDir, { recursive: true });
    const policyFiles: Record<string, string | null> = {
      "stack-tools.cedar": STACK_TOOLS_POLICY,
      ...(options.ruleOfTwo ? {} : { "rule-of-two.cedar": null }),
      ...options.policyFiles,
    };
    for (const [file, text] of Object.entries(policyFiles)) {
      if (text === null) rmSync(join(this.policyDir, file), { force: true });
      else writeFileSync(join(this.policyDir, file), text);
    }
    const monitorUrl = options.natsMonitorUrl ?? process.env.NATS_MONITOR_URL;
    this.env = {
      NATS_URL: options.natsUrl,
      ...(options.natsTlsCa ? { NATS_TLS_CA: options.natsTlsCa } : {}),
      MONGO_URL: options.mongoUrl,
      MONGO_DB: `${this.name}_runtime`,
      TOOLGATE_SUBJECT_PREFIX: this.name,
      TOOLGATE_TOOLSETS: this.#toolsets.join(","),
      LOG_LEVEL: options.logLevel ?? "info",
      MONGO_MAX_POOL: "8",
      STREAM_REPLICAS: String(this.#streamReplicas),
      EVENT_TRUSTED_KEYS: trustedKeys,
      ...(monitorUrl ? { NATS_MONITOR_URL: monitorUrl } : {}),
      ...options.extraEnv,
    };
    const apiKeyConfig = JSON.stringify(Object.entries(this.apiKeys).map(([user, key]) => ({ key, principal: STACK_USERS[user as keyof typeof STACK_USERS] })));
    const jwtIssuers = JSON.stringify([
      {
        issuer: this.jwtIssuer,
        audience: "toolgate",
        tenant: "acme",
        public_key_pem: idp.publicKey.export({ type: "spki", format: "pem" }).toString(),
        algorithms: ["EdDSA"],
      },
    ]);
    this.#serviceEnv = {
      policy: {
        ...signingKey("policy"),
        POLICY_SIGNING_KEY: privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
        POLICY_DIR: this.policyDir,
        POLICY_RELOAD_MS: "200",
        POLICY_API_KEYS: apiKeyConfig,
        POLICY_JWT_ISSUERS: jwtIssuers,
        HTTP_PORT: "0",
        ...options.env?.policy,
      },
      executor: {
        ...signingKey("executor"),
        POLICY_VERIFY_KEYS: publicKey.export({ type: "spki", format: "pem" }).toString(),
        TOOLS_MONGO_DB: `${this.name}_tools`,
        ...options.env?.executor,
      },
      audit: { HTTP_PORT: "0", ...options.env?.audit },
      orchestrator: {
        ...signingKey("orchestrator"),
        HTTP_PORT: "0",
        ORCHESTRATOR_API_KEYS: apiKeyConfig,
        ORCHESTRATOR_JWT_ISSUERS: jwtIssuers,
        ...options.env?.orchestrator,
      },
    };
  }

  /**
   * Every secret this stack hands its services (API keys, event and decision signing keys, NATS seeds), for a
   * test that checks none of them ever appears in what the services print, publish or store.
   */
  secrets(): string[] {
    const keys = Object.values(this.#serviceEnv).flatMap((env) => [env.EVENT_SIGNING_KEY, env.POLICY_SIGNING_KEY]);
    const pem = (text: string) => text.replace(/-----[A-Z ]+-----/g, "").replace(/\s+/g, "");
    return [...Object.values(this.apiKeys), ...Object.values(this.#natsSeeds), ...keys]
      .filter((v): v is string => typeof v === "string" && v.length > 0)
      .map((v) => (v.includes("BEGIN") ? pem(v) : v));
  }

  /** The `Toolgate-Signature` header value of `service` for a message of exactly these bytes. */
  signatureFor(service: SigningService, data: Uint8Array | string): string {
    return this.eventSigners[service].sign(messageDigest(typeof data === "string" ? new TextEncoder().encode(data) : data));
  }

  /**
   * Publishes `data` on `subject` over `nc` signed as `service` (the event's owner, for a test that drives one
   * consumer directly); without `service`, unsigned: a forgery.
   */
  async publishEvent(nc: NatsConnection, subject: string, data: string | Uint8Array, options: { as?: SigningService; msgID?: string } = {}): Promise<PubAck> {
    const h = natsHeaders();
    if (options.as) h.set(EVENT_SIGNATURE_HEADER, this.signatureFor(options.as, data));
    return jetstream(nc).publish(subject, data, { headers: h, ...(options.msgID ? { msgID: options.msgID } : {}) });
  }

  /** Starts audit, policy, the executors and the orchestrator, each once it is ready. */
  static async start(options: StackOptions): Promise<Stack> {
    const stack = new Stack(options);
    Stack.live.add(stack);
    try {
      await stack.#publishContracts();
      await stack.startService("audit");
      await stack.startService("policy");
      for (let i = 0; i < (options.executors ?? 1); i++) await stack.startService("executor", `executor-${i + 1}`);
      await stack.startService("orchestrator");
    } catch (error) {
      await stack.stop();
      throw error;
    }
    return stack;
  }

  /** Starts (or restarts) one service process with this stack's configuration. */
  async startService(service: ServiceName, label: string = service, extraEnv: Record<string, string> = {}): Promise<ServiceProcess> {
    const seed = this.#natsSeeds[service];
    const proc = await ServiceProcess.start(
      service,
      {
        ...this.env,
        INSTANCE_ID: `${label}-${randomBytes(3).toString("hex")}`,
        ...(seed ? { NATS_NKEY_SEED: seed } : {}),
        ...this.#serviceEnv[service],
        ...extraEnv,
      },
      { label, logName: `${this.name}-${label}` },
    );
    this.processes.push(proc);
    return proc;
  }

  /** The most recently started, still running process with this label. */
  process(label: string): ServiceProcess {
    const proc = [...this.processes].reverse().find((p) => p.name === label && !p.exited);
    if (!proc) throw new Error(`no running process ${label}`);
    return proc;
  }

  /** The JetStream stream that holds the stack's call and run events. */
  get eventStream(): string {
    return `${this.name.toUpperCase().replace(/-/g, "_")}_EVENTS`;
  }

  get orchestratorUrl(): string {
    return `http://127.0.0.1:${this.process("orchestrator").httpPort}`;
  }

  get auditUrl(): string {
    return `http://127.0.0.1:${this.process("audit").httpPort}`;
  }

  /** Policy's API (approvals) and approval page. */
  get policyUrl(): string {
    return `http://127.0.0.1:${this.process("policy").httpPort}`;
  }

  /** Calls policy's approval API with any bearer credential (by default carol's API key: an approver). */
  async policyApi<T = unknown>(
    method: "GET" | "POST",
    path: string,
    body?: unknown,
    credential: string = this.apiKeys.carol,
  ): Promise<{ status: number; body: T }> {
    const response = await fetch(`${this.policyUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${credential}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: response.status, body: (await response.json()) as T };
  }

  /** A JWT from the stack's identity provider (tenant `acme`), valid for five minutes. */
  async jwt(claims: { sub: string; roles?: string[] } & Record<string, unknown>): Promise<string> {
    return new SignJWT(claims)
      .setProtectedHeader({ alg: "EdDSA" })
      .setIssuer(this.jwtIssuer)
      .setAudience("toolgate")
      .setExpirationTime("5m")
      .sign(this.#idpKey);
  }

  /** Calls the orchestrator's API with any bearer credential. */
  async apiWith<T = unknown>(credential: string, method: "GET" | "POST", path: string, body?: unknown): Promise<{ status: number; body: T }> {
    const response = await fetch(`${this.orchestratorUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${credential}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: response.status, body: (await response.json()) as T };
  }

  /** Calls the orchestrator's API as `user`; returns status and parsed body. */
  async api<T = unknown>(method: "GET" | "POST", path: string, body?: unknown, user: keyof typeof STACK_USERS = "alice"): Promise<{ status: number; body: T }> {
    return this.apiWith<T>(this.apiKeys[user], method, path, body);
  }

  /** Calls the audit query API. */
  async audit<T = unknown>(path: string): Promise<{ status: number; body: T }> {
    const response = await fetch(`${this.auditUrl}${path}`);
    return { status: response.status, body: (await response.json()) as T };
  }

  /** Starts a managed run and waits until it is no longer running; returns the run view. */
  async runToEnd(model: string, input: string, context: Record<string, string> = {}, user: keyof typeof STACK_USERS = "alice"): Promise<RunView> {
    const started = await this.api<{ run_id: string }>("POST", "/v1/runs", { model, input, context }, user);
    if (started.status !== 202) throw new Error(`run not accepted (${started.status}): ${JSON.stringify(started.body)}`);
    const deadline = Date.now() + 60_000;
    for (;;) {
      const run = await this.api<RunView>("GET", `/v1/runs/${started.body.run_id}?wait_ms=10000`, undefined, user);
      if (run.body.status !== "running") return run.body;
      if (Date.now() > deadline) throw new Error(`run ${started.body.run_id} still running after 60 s`);
    }
  }

  /**
   * The run's events as audit stored them, once audit holds the run's final event and one `result_attached`
   * per proposed call (audit consumes asynchronously, so the run can end before its trail is complete).
   */
  async trace(runId: string, timeoutMs = 30_000): Promise<AuditedEvent[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const { body } = await this.audit<{ events: AuditedEvent[] }>(`/v1/runs/${runId}/events`);
      const events = body.events ?? [];
      const finished = events.some((e) => e.event.kind === "run" && (e.event.type === "completed" || e.event.type === "stopped"));
      const proposed = events.filter((e) => e.event.type === "proposed").length;
      const attached = events.filter((e) => e.event.type === "result_attached").length;
      if (finished && proposed === attached) return events;
      if (Date.now() > deadline) throw new Error(`audit trail of ${runId} incomplete after ${timeoutMs} ms: ${events.length} events`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /**
   * Stops every process gracefully (SIGTERM), the orchestrator first, then deletes the stack's JetStream
   * streams so that repeated test runs do not pile streams up on a shared server. Its databases stay for
   * inspection after a failure; their names start with the stack's name.
   */
  async stop(): Promise<void> {
    Stack.live.delete(this);
    const order: string[] = ["orchestrator", "policy", "executor", "audit"];
    const rank = (p: ServiceProcess) => order.findIndex((s) => p.name.startsWith(s));
    for (const proc of [...this.processes].sort((a, b) => rank(a) - rank(b))) await proc.stop();
    rmSync(this.policyDir, { recursive: true, force: true });
    await this.#deleteStreams();
  }

  /**
   * Resolves once every consumer of the stack's event stream has delivered and seen acknowledged everything
   * stored so far: the services have caught up (a benchmark phase then starts without an earlier one's backlog).
   */
  async quiesce(timeoutMs = 120_000): Promise<void> {
    const nc = await this.#connectAsOperator();
    try {
      const jsm = await jetstreamManager(nc);
      const stream = this.eventStream;
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        let busy = 0;
        for await (const info of jsm.consumers.list(stream)) busy += info.num_pending + info.num_ack_pending;
        if (busy === 0) return;
        if (Date.now() > deadline) throw new Error(`stack ${this.name} still has ${busy} events in flight after ${timeoutMs} ms`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    } finally {
      await nc.close();
    }
  }

  /**
   * Publishes the contracts of this stack's tool sets to its catalog, as a deployment's release step would
   * (`toolgate-contracts publish`): every service knows them from its start, also in a stack whose executors
   * the test drives itself. The executors publish the same contracts again, which changes nothing.
   */
  async #publishContracts(): Promise<void> {
    const contracts = await toolsetContracts(ToolsetNameSchema.array().parse(this.#toolsets));
    await this.#withCatalog(async (catalog) => {
      for (const contract of contracts) {
        const outcome = await publishRetrying(() => catalog.publish(contract));
        if (!outcome.ok) throw new Error(`contract ${contract.name}@${contract.version} not published: ${outcome.message}`);
      }
    });
  }

  /**
   * Publishes one more contract to this stack's catalog (a tool no executor links, an imported one) and waits
   * until the orchestrator lists it; the catalog's answer to the publish.
   */
  async publishContract(contract: ToolContractInput, timeoutMs = 15_000): Promise<Awaited<ReturnType<ContractCatalog["publish"]>>> {
    const outcome = await this.#withCatalog((catalog) => publishRetrying(() => catalog.publish(contract)));
    if (!outcome.ok) return outcome;
    await waitFor(async () => (await this.api<{ tools: { name: string }[] }>("GET", "/v1/tools")).body.tools.some((t) => t.name === contract.name), {
      timeoutMs,
      description: `${contract.name} reaching the orchestrator through the catalog`,
    });
    return outcome;
  }

  /** Runs `use` with this stack's contract catalog, on a connection of the stack's own. */
  async #withCatalog<T>(use: (catalog: ContractCatalog) => Promise<T>): Promise<T> {
    const nc = await this.#connectAsOperator();
    try {
      const stem = this.name.toUpperCase().replace(/-/g, "_");
      const stream = `${stem}_CONTRACTS`;
      const catalog = await ContractCatalog.connect(nc, {
        stream,
        subjectPrefix: `${this.name}.contracts`,
        resyncIntervalMs: 0,
        replicas: this.#streamReplicas,
        requestTimeoutMs: CATALOG_ATTEMPT_MS,
      });
      try {
        // A replicated stream just created answers publishes only once its replicas have elected a leader (on a
        // cluster that has just started this can outlast a publish's timeout).
        const jsm = await jetstreamManager(nc);
        await waitFor(
          async () => {
            const info = await jsm.streams.info(stream);
            return info.cluster === undefined || info.cluster.leader !== undefined;
          },
          { timeoutMs: 30_000, intervalMs: 100, description: `a leader for the stream ${stream}` },
        );
        return await use(catalog);
      } finally {
        catalog.close();
      }
    } finally {
      await nc.close();
    }
  }

  /** A NATS connection for the test to watch the stack's subjects with (the operator's identity); the test closes it. */
  watchConnection(): ReturnType<typeof connect> {
    return this.#connectAsOperator();
  }

  /** A connection of the stack's own, with the operator's identity when the stack has identities. */
  #connectAsOperator(): ReturnType<typeof connect> {
    const seed = this.#natsSeeds.operator;
    return connect({
      servers: this.#natsServers,
      ...(seed ? { authenticator: seedAuthenticator(seed) } : {}),
      ...(this.#natsTlsCa ? { tls: { caFile: this.#natsTlsCa } } : {}),
    });
  }

  async #deleteStreams(): Promise<void> {
    const nc = await this.#connectAsOperator();
    try {
      const jsm = await jetstreamManager(nc);
      const stem = this.name.toUpperCase().replace(/-/g, "_");
      for await (const info of jsm.streams.list()) {
        if (info.config.name.startsWith(`${stem}_`)) await jsm.streams.delete(info.config.name);
      }
    } finally {
      await nc.close();
    }
  }
}

/** How long one attempt to publish a contract waits, and how many are made. */
const CATALOG_ATTEMPT_MS = 2_000;
const CATALOG_ATTEMPTS = 8;

/**
 * Publishes a contract again while the catalog is unavailable (a retryable `CatalogError`). The first publish
 * to the replicated stream of a cluster that has just started can go unanswered although the stream has its
 * leader (seen once in CI: a 5 s timeout). Publishing again is safe: the stream keeps one message per subject,
 * and a contract's subject is its hash.
 */
async function publishRetrying<T>(publish: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await publish();
    } catch (error) {
      if ((error as { retryable?: unknown }).retryable !== true || attempt >= CATALOG_ATTEMPTS) throw error;
    }
  }
}
