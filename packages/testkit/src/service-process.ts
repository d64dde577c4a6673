import { spawn, type ChildProcess } from "node:child_process";
import { createWriteStream, mkdirSync, type WriteStream } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

/** Repository root, found from this file's place in packages/testkit/dist. */
export const REPO_ROOT = fileURLToPath(new URL("../../../", import.meta.url));

export type ServiceName = "orchestrator" | "policy" | "executor" | "audit";

/** One parsed JSON log line of a service. */
export type LogLine = Record<string, unknown> & { msg?: string; level?: string };

/** What a service reports about itself on SIGUSR2 (see `RuntimeStats` in the telemetry package). */
export interface ServiceStats {
  counters: Record<string, number>;
  /** `[kind, name, startUs, endUs]`: database commands (`db`), messages handled (`in`), publishes (`out`), ledger claims (`js`). */
  trace: ["db" | "in" | "out" | "js", string, number, number][];
  /** The process's CPU time so far, in microseconds. */
  cpu: { user: number; system: number };
}

/** A service started as its own OS process from its built entry point. */
export class ServiceProcess {
  readonly name: string;
  readonly #child: ChildProcess;
  readonly #lines: LogLine[] = [];
  readonly #listeners = new Set<(line: LogLine) => void>();
  readonly #exited: Promise<number | null>;
  #ready: LogLine | undefined;
  #exitCode: number | null | undefined;

  private constructor(name: string, child: ChildProcess, file?: WriteStream) {
    this.name = name;
    this.#child = child;
    this.#exited = new Promise((resolve) => {
      child.once("exit", (code, signal) => {
        this.#exitCode = code ?? (signal ? null : 0);
        resolve(code);
      });
    });
    const rl = createInterface({ input: child.stdout! });
    rl.on("line", (line) => {
      file?.write(`${line}\n`);
      let parsed: LogLine;
      try {
        parsed = JSON.parse(line) as LogLine;
      } catch {
        parsed = { msg: line, raw: true };
      }
      this.#lines.push(parsed);
      if (this.#lines.length > 5_000) this.#lines.shift();
      for (const listener of this.#listeners) listener(parsed);
    });
    createInterface({ input: child.stderr! }).on("line", (line) => {
      file?.write(`${line}\n`);
      this.#lines.push({ msg: line, stderr: true });
    });
    child.once("exit", () => file?.end());
  }

  /**
   * Spawns `node services/<service>/dist/main.js` with exactly `env` (plus PATH) and resolves once the
   * service logs `ready`; rejects if it exits first or does not become ready in time. With
   * `TOOLGATE_TEST_LOG_DIR` set, every line the process prints is also kept in `<dir>/<logName or label>-<pid>.log`
   * (the in-memory tail keeps only the last 5,000), for whoever debugs a failure after the fact.
   */
  static async start(
    service: ServiceName,
    env: Record<string, string>,
    options: { label?: string; logName?: string; timeoutMs?: number } = {},
  ): Promise<ServiceProcess> {
    const entry = `${REPO_ROOT}services/${service}/dist/main.js`;
    // TOOLGATE_NODE_ARGS passes V8 and profiling flags (e.g. --cpu-prof) that NODE_OPTIONS does not allow; the
    // service's own env takes precedence, so that a benchmark can give them to one of two stacks.
    const nodeArgs = (env.TOOLGATE_NODE_ARGS ?? process.env.TOOLGATE_NODE_ARGS ?? "").split(" ").filter(Boolean);
    const child = spawn(process.execPath, [...nodeArgs, entry], {
      env: { PATH: process.env.PATH ?? "", LOG_LEVEL: "info", ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    const label = options.label ?? service;
    const logDir = process.env.TOOLGATE_TEST_LOG_DIR;
    if (logDir) mkdirSync(logDir, { recursive: true });
    const file = logDir ? createWriteStream(join(logDir, `${options.logName ?? label}-${child.pid ?? "unknown"}.log`), { flags: "a" }) : undefined;
    const proc = new ServiceProcess(label, child, file);
    await proc.#waitReady(options.timeoutMs ?? 30_000);
    return proc;
  }

  async #waitReady(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const ready = this.#lines.find((l) => l.msg === "ready");
      if (ready) {
        this.#ready = ready;
        return;
      }
      if (this.#exitCode !== undefined) throw new Error(`${this.name} exited (${this.#exitCode}) before ready:\n${this.tail(30)}`);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    this.#child.kill("SIGKILL");
    throw new Error(`${this.name} not ready within ${timeoutMs} ms:\n${this.tail(30)}`);
  }

  get pid(): number {
    return this.#child.pid ?? -1;
  }

  /** HTTP port the service reported when ready (orchestrator and audit serve HTTP). */
  get httpPort(): number {
    const port = this.#ready?.http_port;
    if (typeof port !== "number") throw new Error(`${this.name} did not report an http_port`);
    return port;
  }

  get exited(): boolean {
    return this.#exitCode !== undefined;
  }

  /** Every log line so far. */
  logs(): readonly LogLine[] {
    return this.#lines;
  }

  /** The last `n` log lines as text, for failure messages. */
  tail(n: number): string {
    return this.#lines
      .slice(-n)
      .map((l) => JSON.stringify(l))
      .join("\n");
  }

  /**
   * The service's counters, the spans it recorded since the last call (see `STATS_TRACE_CAPACITY`) and its CPU
   * time in microseconds, from the `stats` line it logs on SIGUSR2. Rejects if none arrives within `timeoutMs`.
   */
  async stats(timeoutMs = 10_000): Promise<ServiceStats> {
    if (this.#exitCode !== undefined) throw new Error(`${this.name} has exited`);
    let listener: ((line: LogLine) => void) | undefined;
    let timer: NodeJS.Timeout | undefined;
    try {
      return await new Promise<ServiceStats>((resolve, reject) => {
        listener = (line) => {
          if (line.msg === "stats") resolve({ ...(line.stats as Omit<ServiceStats, "cpu">), cpu: line.cpu as ServiceStats["cpu"] });
        };
        this.#listeners.add(listener);
        timer = setTimeout(() => reject(new Error(`${this.name} logged no stats within ${timeoutMs} ms`)), timeoutMs);
        this.#child.kill("SIGUSR2");
      });
    } finally {
      clearTimeout(timer);
      if (listener) this.#listeners.delete(listener);
    }
  }

  /** Sends a signal without waiting (SIGKILL to crash, SIGSTOP/SIGCONT to pause). */
  signal(sig: NodeJS.Signals): void {
    this.#child.kill(sig);
  }

  /** SIGTERM and wait for a graceful exit; resolves with the exit code. */
  async stop(timeoutMs = 15_000): Promise<number | null> {
    if (this.#exitCode !== undefined) return this.#exitCode;
    this.#child.kill("SIGTERM");
    const timer = setTimeout(() => this.#child.kill("SIGKILL"), timeoutMs);
    try {
      return await this.#exited;
    } finally {
      clearTimeout(timer);
    }
  }

  /** SIGKILL and wait for the process to be gone. */
  async kill(): Promise<void> {
    if (this.#exitCode !== undefined) return;
    this.#child.kill("SIGKILL");
    await this.#exited;
  }
}
