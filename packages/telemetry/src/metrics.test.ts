import { describe, expect, it } from "vitest";
import { serveMetrics, ServiceMetrics } from "./metrics.js";
import { RuntimeStats } from "./runtime-stats.js";

const lines = (text: string, name: string) => text.split("\n").filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `));

describe("ServiceMetrics", () => {
  it("exports the runtime counters at scrape time, labelled by consumer, event type and collection, with the service label", async () => {
    const stats = new RuntimeStats();
    const metrics = new ServiceMetrics({ service: "executor", stats });
    stats.add("bus.deliver.executor", 3);
    stats.add("bus.redeliver.executor");
    stats.add("bus.publish.call.completed", 2);
    stats.add("bus.ack.executor", 2);
    stats.add("bus.nak.executor");
    stats.add("db.insert.tg1_runtime.idempotency_keys", 4);
    stats.add("db.failed.insert");
    const first = await metrics.scrape(undefined);
    expect(first.status).toBe(200);
    expect(lines(first.body, "toolgate_consumer_deliveries_total")).toEqual(['toolgate_consumer_deliveries_total{consumer="executor",service="executor"} 3']);
    expect(lines(first.body, "toolgate_consumer_redeliveries_total")).toEqual([
      'toolgate_consumer_redeliveries_total{consumer="executor",service="executor"} 1',
    ]);
    expect(lines(first.body, "toolgate_events_published_total")).toEqual([
      'toolgate_events_published_total{kind="call",type="completed",service="executor"} 2',
    ]);
    expect(lines(first.body, "toolgate_consumer_dispositions_total").sort()).toEqual([
      'toolgate_consumer_dispositions_total{consumer="executor",disposition="ack",service="executor"} 2',
      'toolgate_consumer_dispositions_total{consumer="executor",disposition="nak",service="executor"} 1',
    ]);
    // The database name is not a label: one per deployment, and the test stacks' are random.
    expect(lines(first.body, "toolgate_db_commands_total")).toEqual([
      'toolgate_db_commands_total{command="insert",collection="idempotency_keys",service="executor"} 4',
    ]);
    expect(lines(first.body, "toolgate_db_command_failures_total")).toEqual(['toolgate_db_command_failures_total{command="insert",service="executor"} 1']);
    // Counters read again, not added twice.
    stats.add("bus.deliver.executor");
    expect(lines((await metrics.scrape(undefined)).body, "toolgate_consumer_deliveries_total")).toEqual([
      'toolgate_consumer_deliveries_total{consumer="executor",service="executor"} 4',
    ]);
    // A scrape does not take the spans a benchmark's SIGUSR2 snapshot hands over.
    expect(stats.snapshot().counters["bus.deliver.executor"]).toBe(4);
    expect(first.body).toContain("process_cpu_seconds_total");
  });

  it("asks for the bearer token when one is configured", async () => {
    const metrics = new ServiceMetrics({ service: "audit", stats: new RuntimeStats(), token: "0123456789abcdef0123" });
    expect((await metrics.scrape(undefined)).status).toBe(401);
    expect((await metrics.scrape("Bearer 0123456789abcdef012")).status).toBe(401);
    expect((await metrics.scrape("0123456789abcdef0123")).status).toBe(401);
    const ok = await metrics.scrape("Bearer 0123456789abcdef0123");
    expect(ok.status).toBe(200);
    expect(ok.body).not.toContain("0123456789abcdef0123");
  });

  it("serves /metrics and /healthz on a listener of its own, and nothing else", async () => {
    const metrics = new ServiceMetrics({ service: "executor", stats: new RuntimeStats() });
    metrics.counter({ name: "toolgate_test_total", help: "a test counter", labelNames: ["tool"] }).inc({ tool: "search_sources" }, 2);
    const server = await serveMetrics(metrics, { host: "127.0.0.1", port: 0 });
    try {
      const base = `http://127.0.0.1:${server.port}`;
      const scraped = await fetch(`${base}/metrics`);
      expect(scraped.status).toBe(200);
      expect(scraped.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
      expect(lines(await scraped.text(), "toolgate_test_total")).toEqual(['toolgate_test_total{tool="search_sources",service="executor"} 2']);
      expect((await fetch(`${base}/healthz`)).status).toBe(200);
      expect((await fetch(`${base}/v1/anything`)).status).toBe(404);
      expect((await fetch(`${base}/metrics`, { method: "POST" })).status).toBe(404);
    } finally {
      await server.close();
    }
  });
});
