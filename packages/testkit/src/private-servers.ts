import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createServer, Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { REPO_ROOT } from "./service-process.js";

/**
 * A NATS server and a FerretDB of one's own, for tests and the chaos suite that kill, pause and restart the
 * servers themselves — never the shared ones other tests run against. Both are the dev machine's binaries
 * (`./infra/dev.sh up` installs nats-server and builds FerretDB); FerretDB keeps its data in a PostgreSQL
 * database of its own on the local server, dropped by `stop()`.
 */

const PG = { host: "127.0.0.1", port: 5432, user: "postgres" };

/** One server process that can be killed, paused and started again on the same port and data. */
abstract class PrivateServer {
  #child: ChildProcess | undefined;
  protected abstract readonly name: string;

  protected constructor(readonly port: number) {}

  /** Whether the process is running (it may be paused). */
  get running(): boolean {
    return this.#child !== undefined && this.#child.exitCode === null && this.#child.signalCode === null;
  }

  /** Starts the process (again) and waits until its port accepts connections. */
  async start(): Promise<void> {
    if (this.running) return;
    const child = this.spawn();
    let output = "";
    child.stdout?.on("data", (chunk: Buffer) => (output = (output + chunk.toString()).slice(-4_000)));
    child.stderr?.on("data", (chunk: Buffer) => (output = (output + chunk.toString()).slice(-4_000)));
    this.#child = child;
    const deadline = Date.now() + 15_000;
    while (!(await portOpen(this.port))) {
      if (!this.running) throw new Error(`${this.name} exited while starting:\n${output}`);
      if (Date.now() > deadline) throw new Error(`${this.name} did not listen on ${this.port} within 15 s:\n${output}`);
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

  /** Stops the process (SIGSTOP): connections stay open and nothing answers. */
  pause(): void {
    this.#child?.kill("SIGSTOP");
  }

  resume(): void {
    this.#child?.kill("SIGCONT");
  }

  protected abstract spawn(): ChildProcess;

  async stop(): Promise<void> {
    this.resume();
    await this.kill("SIGTERM");
  }
}

export class PrivateNats extends PrivateServer {
  protected readonly name = "nats-server";
  readonly #storeDir = mkdtempSync(join(tmpdir(), "tg-nats-"));
  readonly #binary: string;

  private constructor(port: number, binary: string) {
    super(port);
    this.#binary = binary;
  }

  /** A JetStream-enabled nats-server on a free port, its store in a temporary directory kept across restarts. */
  static async start(): Promise<PrivateNats> {
    const server = new PrivateNats(await freePort(), natsBinary());
    await server.start();
    return server;
  }

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  protected spawn(): ChildProcess {
    return spawn(this.#binary, ["-a", "127.0.0.1", "-p", String(this.port), "-js", "-sd", this.#storeDir], { stdio: ["ignore", "pipe", "pipe"] });
  }

  override async stop(): Promise<void> {
    await super.stop();
    rmSync(this.#storeDir, { recursive: true, force: true });
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
        `--postgresql-url=postgres://${PG.user}@${PG.host}:${PG.port}/${this.#database}?pool_max_conns=40`,
        `--listen-addr=127.0.0.1:${this.port}`,
        "--telemetry=disable",
        `--state-dir=${this.#stateDir}`,
        "--debug-addr=-",
        "--log-level=warn",
      ],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
  }

  override async stop(): Promise<void> {
    await super.stop();
    psql("postgres", `DROP DATABASE IF EXISTS ${this.#database} WITH (FORCE)`);
    rmSync(this.#stateDir, { recursive: true, force: true });
  }
}

function natsBinary(): string {
  const found = spawnSync("sh", ["-c", "command -v nats-server"], { encoding: "utf8" }).stdout.trim();
  if (found) return found;
  if (existsSync("/usr/sbin/nats-server")) return "/usr/sbin/nats-server";
  throw new Error("nats-server is not installed: run ./infra/dev.sh up once");
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

function freePort(): Promise<number> {
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
