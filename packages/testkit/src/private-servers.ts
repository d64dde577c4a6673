import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { execFileSync, spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, Socket } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { generateNatsIdentities, natsAuthorizationConfig, type NatsRole } from "@toolgate/bus";
import { REPO_ROOT } from "./service-process.js";

/**
 * A NATS server, a three-node NATS cluster and a FerretDB of one's own, for tests and the chaos suite that
 * kill, pause and restart the servers themselves — never the shared ones other tests run against. All run the
 * project's builds (`./infra/dev.sh up` builds nats-server and FerretDB into infra/.bin) and NATS runs the
 * configurations in infra/nats/ (file storage; cluster nodes with `sync_interval: always`); FerretDB keeps its data in a
 * PostgreSQL database of its own on the local server, dropped by `stop()`.
 */

const PG = { host: "127.0.0.1", port: 5432, user: "postgres" };
/** The local server's Unix socket: FerretDB connects through it when it is there, as infra/dev.sh's server does. */
const PG_SOCKET_DIR = "/var/run/postgresql";

/** How FerretDB reaches `database`: the Unix socket (no TCP, no TLS) when there is one, else plain TCP. */
function ferretdbPostgresUrl(database: string): string {
  return existsSync(join(PG_SOCKET_DIR, `.s.PGSQL.${PG.port}`))
    ? `postgres://${PG.user}@/${database}?host=${PG_SOCKET_DIR}`
    : `postgres://${PG.user}@${PG.host}:${PG.port}/${database}?sslmode=disable`;
}

/** One server process that can be killed, paused and started again on the same port and data. */
abstract class PrivateServer {
  #child: ChildProcess | undefined;
  #paused = false;
  #output = "";
  protected abstract readonly name: string;

  protected constructor(readonly port: number) {}

  /** Whether the process is running (it may be paused). */
  get running(): boolean {
    return this.#child !== undefined && this.#child.exitCode === null && this.#child.signalCode === null;
  }

  /** The last 4,000 characters the process (this start of it) wrote to stdout and stderr. */
  get recentOutput(): string {
    return this.#output;
  }

  /** Starts the process (again) and waits until its port accepts connections. */
  async start(): Promise<void> {
    if (this.running) return;
    const child = this.spawn();
    this.#output = "";
    const keep = (chunk: Buffer) => (this.#output = (this.#output + chunk.toString()).slice(-4_000));
    child.stdout?.on("data", keep);
    child.stderr?.on("data", keep);
    this.#child = child;
    const deadline = Date.now() + 15_000;
    while (!(await portOpen(this.port))) {
      if (!this.running) throw new Error(`${this.name} exited while starting:\n${this.#output}`);
      if (Date.now() > deadline) throw new Error(`${this.name} did not listen on ${this.port} within 15 s:\n${this.#output}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  /** Sends `signal` and, for a signal that ends the process, waits until it has exited. */
  async kill(signal: NodeJS.Signals = "SIGKILL"): Promise<void> {
    const child = this.#child;
    if (!child || !this.running) return;
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    child.kill(signal);
    if (signal === "SIGKILL" || signal === "SIGTERM" || signal === "SIGINT") await exited;
  }

  /**
   * Stops the process (SIGSTOP): connections stay open and nothing answers. Returns once the kernel shows it stopped:
   * a signal is delivered asynchronously, and a server still running for a moment can answer one more request.
   */
  pause(): void {
    const child = this.#child;
    if (!child?.kill("SIGSTOP")) return;
    this.#paused = true;
    const until = Date.now() + 2_000;
    while (Date.now() < until && child.pid !== undefined && processState(child.pid) !== "T") {
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1);
    }
  }

  resume(): void {
    this.#child?.kill("SIGCONT");
    this.#paused = false;
  }

  /** Whether the process is stopped by {@link pause}. */
  get paused(): boolean {
    return this.running && this.#paused;
  }

  protected abstract spawn(): ChildProcess;

  async stop(): Promise<void> {
    this.resume();
    await this.kill("SIGTERM");
  }
}

/** The ports and settings one nats-server process reads from the environment (see infra/nats/*.conf). */
interface NatsNodeSettings {
  serverName: string;
  port: number;
  httpPort: number;
  /** A configuration file in infra/nats/, or the path of one elsewhere. */
  config: "server.conf" | "cluster-node.conf" | { path: string };
  env: Record<string, string>;
}

/**
 * One nats-server of the project's build, its store in a temporary directory kept across restarts. `start()`
 * resolves once the client port listens; {@link healthy} waits for JetStream itself.
 */
export class PrivateNatsNode extends PrivateServer {
  protected readonly name: string;
  readonly serverName: string;
  readonly httpPort: number;
  readonly #binary = natsBinary();
  readonly #storeDir = mkdtempSync(join(tmpdir(), "tg-nats-"));
  readonly #settings: NatsNodeSettings;

  constructor(settings: NatsNodeSettings) {
    super(settings.port);
    this.#settings = settings;
    this.serverName = settings.serverName;
    this.httpPort = settings.httpPort;
    this.name = `nats-server ${settings.serverName}`;
  }

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  /** The monitoring endpoint (what `NATS_MONITOR_URL` takes: the start-up guards read `/varz` there). */
  get monitorUrl(): string {
    return `http://127.0.0.1:${this.httpPort}`;
  }

  /**
   * Resolves once the monitoring endpoint reports JetStream healthy: enabled, and in a cluster with a meta
   * leader and this node's streams and consumers current. Throws after `timeoutMs`.
   */
  async healthy(timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const problem = await this.#healthProblem();
      if (problem === undefined) return;
      if (!this.running) throw new Error(`${this.name} is not running`);
      if (Date.now() > deadline) throw new Error(`${this.name} not healthy after ${timeoutMs} ms: ${problem}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /** Why `/healthz` is not OK now, or undefined when it is. */
  async #healthProblem(): Promise<string | undefined> {
    try {
      const response = await fetch(`http://127.0.0.1:${this.httpPort}/healthz`, { signal: AbortSignal.timeout(1_000) });
      return response.ok ? undefined : `${response.status} ${await response.text()}`;
    } catch (error) {
      return (error as Error).message;
    }
  }

  protected spawn(): ChildProcess {
    const { serverName, port, httpPort, config, env } = this.#settings;
    return spawn(this.#binary, ["-c", typeof config === "string" ? join(REPO_ROOT, "infra/nats", config) : config.path], {
      env: {
        ...process.env,
        TOOLGATE_NATS_NAME: serverName,
        TOOLGATE_NATS_LISTEN: `127.0.0.1:${port}`,
        TOOLGATE_NATS_HTTP: `127.0.0.1:${httpPort}`,
        TOOLGATE_NATS_STORE_DIR: this.#storeDir,
        ...env,
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
  }

  override async stop(): Promise<void> {
    await super.stop();
    rmSync(this.#storeDir, { recursive: true, force: true });
  }
}

/** A single JetStream nats-server (infra/nats/server.conf) on free ports. */
/** Which connections a private server admits: anyone (no identities), identities only, or both (as the dev server). */
export type PrivateIdentities = "only" | "local-tools" | undefined;

/**
 * The configuration to start `base` with: itself, or a file in a temporary directory that includes it and admits
 * a fresh identity per role (permissions under any prefix), whose seeds it returns.
 */
function withIdentities(
  base: "server.conf" | "cluster-node.conf",
  identities: PrivateIdentities,
  tls = false,
): { config: NatsNodeSettings["config"]; seeds: Partial<Record<NatsRole, string>>; tlsCa?: string } {
  if (!identities && !tls) return { config: base, seeds: {} };
  const dir = mkdtempSync(join(tmpdir(), "tg-nats-auth-"));
  const path = join(dir, "nats-auth.conf");
  const created = identities ? generateNatsIdentities() : [];
  const include = relative(dirname(path), join(REPO_ROOT, "infra/nats", base));
  const lines = [`include ${JSON.stringify(include)}`];
  if (identities) lines.push(natsAuthorizationConfig(created, { prefix: "*", openToLocalTools: identities === "local-tools" }));
  if (tls) {
    // The CA and certificate the docker-compose servers get from ./infra/generate-env.sh, for loopback.
    execFileSync(join(REPO_ROOT, "infra/nats/make-tls.sh"), [join(dir, "tls"), join(dir, "tls"), "localhost", "127.0.0.1"], { stdio: "pipe" });
    lines.push(`include ${JSON.stringify("tls/tls.conf")}`);
  }
  writeFileSync(path, `${lines.join("\n")}\n`);
  return {
    config: { path },
    seeds: Object.fromEntries(created.map(({ role, seed }) => [role, seed])),
    ...(tls ? { tlsCa: join(dir, "tls", "ca.pem") } : {}),
  };
}

export class PrivateNats extends PrivateNatsNode {
  /** The identities' seeds by role, when the server was started with identities. */
  seeds: Partial<Record<NatsRole, string>> = {};
  /** The CA (a PEM file) its certificate is signed by, when the server was started with `tls`. */
  tlsCa: string | undefined;

  /**
   * Starts the server and waits until JetStream is up. Throws when infra/.bin/nats-server is missing. With
   * `identities`, the server admits only the identities it creates (`seeds`, one per role, each held to its
   * subject permissions under any prefix); `"local-tools"` also lets connections without credentials in with
   * every right, as the dev server does. With `tls`, client connections must use TLS (a fresh CA: `tlsCa`).
   */
  static async start(options: { identities?: PrivateIdentities; tls?: boolean } = {}): Promise<PrivateNats> {
    const [port, httpPort] = await freePorts(2);
    const { config, seeds, tlsCa } = withIdentities("server.conf", options.identities, options.tls);
    const server = new PrivateNats({ serverName: "private", port: port!, httpPort: httpPort!, config, env: {} });
    server.seeds = seeds;
    server.tlsCa = tlsCa;
    await server.start();
    await server.healthy();
    return server;
  }
}

/**
 * Three nats-server nodes on loopback, routed into one JetStream cluster (infra/nats/cluster-node.conf), for
 * tests of a node's loss: each node can be killed, restarted, paused and resumed, and the cluster tells which
 * node leads a stream.
 */
export class PrivateNatsCluster {
  readonly nodes: readonly PrivateNatsNode[];
  /** The identities' seeds by role, when the cluster was started with identities (as {@link PrivateNats.start}). */
  readonly seeds: Partial<Record<NatsRole, string>>;

  private constructor(nodes: PrivateNatsNode[], seeds: Partial<Record<NatsRole, string>>) {
    this.nodes = nodes;
    this.seeds = seeds;
  }

  /** Starts the three nodes and waits until each reports JetStream healthy (the meta group has a leader). */
  static async start(options: { identities?: PrivateIdentities } = {}): Promise<PrivateNatsCluster> {
    const { config, seeds } = withIdentities("cluster-node.conf", options.identities);
    const ports = await freePorts(9);
    const at = (i: number) => ports[i]!;
    const routes = Object.fromEntries([0, 1, 2].map((i) => [`TOOLGATE_NATS_ROUTE_${i + 1}`, `nats-route://127.0.0.1:${at(6 + i)}`]));
    const nodes = [0, 1, 2].map(
      (i) =>
        new PrivateNatsNode({
          serverName: `n${i + 1}`,
          port: at(i),
          httpPort: at(3 + i),
          config,
          env: { TOOLGATE_NATS_CLUSTER_LISTEN: `127.0.0.1:${at(6 + i)}`, ...routes },
        }),
    );
    const cluster = new PrivateNatsCluster(nodes, seeds);
    try {
      await Promise.all(nodes.map((node) => node.start()));
      await Promise.all(nodes.map((node) => node.healthy()));
    } catch (error) {
      await cluster.stop();
      throw error;
    }
    return cluster;
  }

  /** Every node's client URL, comma-separated (what `NATS_URL` takes). */
  get urls(): string {
    return this.nodes.map((node) => node.url).join(",");
  }

  /** Every node's monitoring URL, comma-separated (what `NATS_MONITOR_URL` takes). */
  get monitorUrls(): string {
    return this.nodes.map((node) => node.monitorUrl).join(",");
  }

  /** Starts a stopped node again on its ports and store, and waits until it has caught up (healthy). */
  async restart(node: PrivateNatsNode, timeoutMs = 60_000): Promise<void> {
    await node.start();
    await node.healthy(timeoutMs);
  }

  /**
   * The node that leads `stream` (JetStream stream info, `cluster.leader`), asked through the nodes that run
   * and are not paused. Throws when the stream has no leader within `timeoutMs` (no quorum, or an election).
   */
  async streamLeader(stream: string, timeoutMs = 10_000): Promise<PrivateNatsNode> {
    const live = this.nodes.filter((node) => node.running && !node.paused);
    if (live.length === 0) throw new Error("no node of the cluster is running");
    const nc = await connect({ servers: live.map((node) => node.url), timeout: 5_000 });
    try {
      // No account-info check up front: during an election it can time out, and the loop below retries anyway.
      const jsm = await jetstreamManager(nc, { timeout: 2_000, checkAPI: false });
      const deadline = Date.now() + timeoutMs;
      let last = "no answer";
      for (;;) {
        try {
          const leader = (await jsm.streams.info(stream)).cluster?.leader;
          const node = this.nodes.find((n) => n.serverName === leader);
          if (node) return node;
          last = `leader ${leader ?? "none"}`;
        } catch (error) {
          last = (error as Error).message;
        }
        if (Date.now() > deadline) throw new Error(`stream ${stream} has no leader after ${timeoutMs} ms: ${last}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    } finally {
      await nc.close();
    }
  }

  /** Stops every node (resuming paused ones first) and removes their stores. */
  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((node) => node.stop()));
  }
}

export class PrivateFerretDb extends PrivateServer {
  protected readonly name = "FerretDB";
  readonly #database: string;
  readonly #stateDir = mkdtempSync(join(tmpdir(), "tg-ferretdb-"));

  private constructor(port: number, database: string) {
    super(port);
    this.#database = database;
  }

  /**
   * A FerretDB on a free port over a new PostgreSQL database (with the index trigger the dev server has), its
   * connection pool kept small: the local PostgreSQL is shared with the dev server's FerretDB.
   */
  static async start(): Promise<PrivateFerretDb> {
    const database = `tg_private_${process.pid}_${Date.now().toString(36)}`;
    psql("postgres", `CREATE DATABASE ${database}`);
    psqlFile(database, join(REPO_ROOT, "infra/ferretdb/gin-indexes.sql"));
    const server = new PrivateFerretDb(await freePort(), database);
    await server.start();
    return server;
  }

  get url(): string {
    return `mongodb://127.0.0.1:${this.port}`;
  }

  protected spawn(): ChildProcess {
    const binary = join(REPO_ROOT, "infra/.bin/ferretdb");
    if (!existsSync(binary)) throw new Error(`${binary} is missing: run ./infra/dev.sh up once to build FerretDB`);
    return spawn(
      binary,
      [
        "--handler=postgresql",
        // Custom plans, as infra/dev.sh's server: a generic plan of FerretDB's `_jsonb -> $1 @> $2` uses no index;
        // and lz4 for large values, as there.
        `--postgresql-url=${ferretdbPostgresUrl(this.#database)}&pool_max_conns=40&plan_cache_mode=force_custom_plan&default_toast_compression=lz4`,
        `--listen-addr=127.0.0.1:${this.port}`,
        "--telemetry=disable",
        `--state-dir=${this.#stateDir}`,
        "--debug-addr=-",
        "--log-level=warn",
      ],
      // One OS thread for its Go code, as infra/dev.sh's server (see FERRETDB_GOMAXPROCS there).
      { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, GOMAXPROCS: process.env.TOOLGATE_FERRETDB_GOMAXPROCS ?? "1" } },
    );
  }

  override async stop(): Promise<void> {
    await super.stop();
    psql("postgres", `DROP DATABASE IF EXISTS ${this.#database} WITH (FORCE)`);
    rmSync(this.#stateDir, { recursive: true, force: true });
  }
}

function natsBinary(): string {
  const binary = join(REPO_ROOT, "infra/.bin/nats-server");
  if (!existsSync(binary)) throw new Error(`${binary} is missing: run ./infra/dev.sh up once to build the project's nats-server`);
  return binary;
}

function psql(database: string, command: string): void {
  run(["-h", PG.host, "-U", PG.user, "-d", database, "-q", "-c", command]);
}

function psqlFile(database: string, file: string): void {
  run(["-h", PG.host, "-U", PG.user, "-d", database, "-q", "-f", file]);
}

function run(args: string[]): void {
  const result = spawnSync("psql", args, { encoding: "utf8" });
  if (result.status !== 0) throw new Error(`psql ${args.join(" ")} failed: ${result.stderr || result.error?.message}`);
}

/** `count` distinct free ports. */
async function freePorts(count: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < count) ports.add(await freePort());
  return [...ports];
}

/** A TCP port on 127.0.0.1 that nothing listens on now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => (typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port"))));
    });
  });
}

function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket();
    const done = (open: boolean) => {
      socket.destroy();
      resolve(open);
    };
    socket.setTimeout(500, () => done(false));
    socket.once("error", () => done(false));
    socket.connect(port, "127.0.0.1", () => done(true));
  });
}

/** A process's state letter from `/proc/<pid>/stat` (`T` once stopped), or undefined once it is gone. */
function processState(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
  } catch {
    return undefined;
  }
}
