import { timingSafeEqual } from "node:crypto";
import { createServer } from "node:http";
import {
  collectDefaultMetrics,
  Counter,
  Gauge,
  Histogram,
  Registry,
  type CounterConfiguration,
  type GaugeConfiguration,
  type HistogramConfiguration,
} from "prom-client";
import type { RuntimeStats } from "./runtime-stats.js";

export type { Counter, Gauge, Histogram } from "prom-client";

/** What a scrape of `/metrics` answers: the exposition text, or 401 when a token is required and not given. */
export interface MetricsScrape {
  status: 200 | 401;
  contentType: string;
  body: string;
}

export interface ServiceMetricsOptions {
  /** The service's name, a label on every metric (`service="executor"`). */
  service: string;
  /** The process's counters: bus and database counts are exported from them rather than counted twice. */
  stats: RuntimeStats;
  /** When set, a scrape must send `Authorization: Bearer <token>`; otherwise `/metrics` is open. */
  token?: string;
}

/** Seconds, for durations of policy decisions and tool executions: 1 ms to 60 s. */
export const DURATION_BUCKETS_S = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/**
 * One Prometheus registry per service process: the default process and Node.js metrics, the bus and database
 * counters of {@link RuntimeStats}, and the service's own metrics (made with {@link counter}, {@link gauge},
 * {@link histogram}). Labels must stay low-cardinality: tool names, codes, reasons — never ids or principals.
 */
export class ServiceMetrics {
  readonly registry = new Registry();
  readonly #token: Buffer | undefined;

  constructor(options: ServiceMetricsOptions) {
    this.#token = options.token === undefined ? undefined : Buffer.from(options.token);
    this.registry.setDefaultLabels({ service: options.service });
    collectDefaultMetrics({ register: this.registry });
    exportRuntimeStats(this, options.stats);
  }

  /** A counter in this registry (`name` should end in `_total`). */
  counter<L extends string>(config: Omit<CounterConfiguration<L>, "registers">): Counter<L> {
    return new Counter({ ...config, registers: [this.registry] });
  }

  /** A gauge in this registry; give it `collect` to read its value at scrape time. */
  gauge<L extends string>(config: Omit<GaugeConfiguration<L>, "registers">): Gauge<L> {
    return new Gauge({ ...config, registers: [this.registry] });
  }

  /** A histogram in this registry (durations in seconds, `name` ending in `_seconds`). */
  histogram<L extends string>(config: Omit<HistogramConfiguration<L>, "registers">): Histogram<L> {
    return new Histogram({ buckets: DURATION_BUCKETS_S, ...config, registers: [this.registry] });
  }

  /** Answers a scrape with the `Authorization` header it came with; never throws for a bad credential. */
  async scrape(authorization: string | undefined): Promise<MetricsScrape> {
    if (this.#token !== undefined) {
      const given = Buffer.from(authorization?.startsWith("Bearer ") ? authorization.slice(7) : "");
      if (given.length !== this.#token.length || !timingSafeEqual(given, this.#token)) {
        return { status: 401, contentType: "text/plain; charset=utf-8", body: "a valid bearer token is required\n" };
      }
    }
    return { status: 200, contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}

/**
 * Serves `GET /metrics` (and `GET /healthz`) on a small HTTP listener of its own, for a service that has no
 * HTTP API (the executor). Resolves with the bound port once listening; rejects if the port cannot be bound.
 */
export async function serveMetrics(metrics: ServiceMetrics, options: { host: string; port: number }): Promise<{ port: number; close(): Promise<void> }> {
  const server = createServer((request, response) => {
    const path = (request.url ?? "").split("?")[0];
    if (request.method !== "GET" || (path !== "/metrics" && path !== "/healthz")) {
      response.writeHead(404, { "content-type": "text/plain; charset=utf-8" }).end("not found\n");
      return;
    }
    if (path === "/healthz") {
      response.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}');
      return;
    }
    metrics.scrape(request.headers.authorization).then(
      (scraped) => response.writeHead(scraped.status, { "content-type": scraped.contentType }).end(scraped.body),
      () => response.writeHead(500, { "content-type": "text/plain; charset=utf-8" }).end("metrics could not be collected\n"),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const address = server.address();
  return {
    port: typeof address === "object" && address ? address.port : options.port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

const DISPOSITIONS = new Set(["ack", "nak", "term"]);

/**
 * Exports the counters the bus and the database driver already keep (`bus.deliver.<consumer>`,
 * `db.<command>.<database>.<collection>`, …) as Prometheus counters, read at scrape time. The database name is
 * dropped: it is one per deployment, and the collection says what was touched.
 */
function exportRuntimeStats(metrics: ServiceMetrics, stats: RuntimeStats): void {
  const fromStats = <L extends string>(name: string, help: string, labelNames: readonly L[], labelsOf: (counter: string) => Record<L, string> | undefined) =>
    metrics.counter({
      name,
      help,
      labelNames,
      collect(this: Counter<L>) {
        this.reset();
        for (const [counter, value] of stats.counters()) {
          const labels = labelsOf(counter);
          if (labels) this.inc(labels, value);
        }
      },
    });
  const rest = (counter: string, prefix: string): string | undefined => (counter.startsWith(prefix) ? counter.slice(prefix.length) : undefined);

  fromStats("toolgate_events_published_total", "Events this process published, by kind and type.", ["kind", "type"], (c) => {
    const [kind, type] = (rest(c, "bus.publish.") ?? "").split(".");
    return kind && type ? { kind, type } : undefined;
  });
  fromStats("toolgate_events_publish_duplicates_total", "Publishes the stream dropped as duplicates (a transition published again).", [], (c) =>
    c === "bus.publish_duplicate" ? {} : undefined,
  );
  fromStats("toolgate_consumer_deliveries_total", "Messages delivered to this process, by durable consumer.", ["consumer"], (c) => {
    const consumer = rest(c, "bus.deliver.");
    return consumer ? { consumer } : undefined;
  });
  fromStats(
    "toolgate_consumer_redeliveries_total",
    "Deliveries that were not a message's first (a crash, an ack wait that ran out, a retry), by durable consumer.",
    ["consumer"],
    (c) => {
      const consumer = rest(c, "bus.redeliver.");
      return consumer ? { consumer } : undefined;
    },
  );
  fromStats(
    "toolgate_consumer_dispositions_total",
    "How handled messages were settled (ack, nak, term), by durable consumer.",
    ["consumer", "disposition"],
    (c) => {
      const [, disposition, ...consumer] = c.split(".");
      return c.startsWith("bus.") && disposition && DISPOSITIONS.has(disposition) && consumer.length > 0
        ? { consumer: consumer.join("."), disposition }
        : undefined;
    },
  );
  fromStats("toolgate_nats_disconnects_total", "Times the NATS connection was lost.", [], (c) => (c === "bus.disconnected" ? {} : undefined));
  fromStats("toolgate_db_commands_total", "Database commands sent, by command and collection.", ["command", "collection"], (c) => {
    if (!c.startsWith("db.") || c.startsWith("db.failed.")) return undefined;
    const [, command, , collection] = c.split(".");
    return command ? { command, collection: collection ?? "" } : undefined;
  });
  fromStats("toolgate_db_command_failures_total", "Database commands that failed, by command.", ["command"], (c) => {
    const command = rest(c, "db.failed.");
    return command ? { command } : undefined;
  });
}
