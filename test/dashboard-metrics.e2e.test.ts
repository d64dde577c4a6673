import { Stack, callTool, resultOf, testInfra } from "@toolgate/testkit";
import { MongoClient } from "mongodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dashboard, dashboardQueries, exposedNames, metricNamesOf } from "./fixtures/observability.js";

// The Grafana dashboard (infra/grafana/dashboards/toolgate.json) against the metrics the four services really
// serve: every metric name its PromQL uses is exported by some service, and every Toolgate metric a service
// exports has a panel. Names are read from each /metrics (declared metrics count even before their first sample).
const SERVICES = ["orchestrator", "policy", "executor-1", "audit"] as const;
/** Series Prometheus makes itself for every target. */
const SYNTHESIZED = new Set(["up", "scrape_duration_seconds", "scrape_samples_scraped"]);

let stack: Stack;
let mongo: MongoClient;

beforeAll(async () => {
  const infra = testInfra();
  mongo = await new MongoClient(infra.mongoUrl).connect();
  // The executor serves its metrics only when given a port, as docker-compose.yml gives it one.
  stack = await Stack.start({ natsUrl: infra.natsUrl, mongoUrl: infra.mongoUrl, env: { executor: { HTTP_PORT: "0" } } });
});

afterAll(async () => {
  await stack?.stop();
  await mongo?.db(`${stack.name}_runtime`).dropDatabase();
  await mongo?.db(`${stack.name}_tools`).dropDatabase();
  await mongo?.close();
});

/** The names each service's /metrics declares or has samples of. */
async function scrapeNames(): Promise<Map<string, Set<string>>> {
  const names = new Map<string, Set<string>>();
  for (const service of SERVICES) {
    const response = await fetch(`http://127.0.0.1:${stack.process(service).httpPort}/metrics`);
    expect(response.status, service).toBe(200);
    names.set(service, exposedNames(await response.text()));
  }
  return names;
}

describe("the Grafana dashboard", () => {
  it("queries only metrics the services export, and has a panel for every Toolgate metric they export", async () => {
    // One call through every service, so that labelled series exist besides their declarations.
    const { callId } = await callTool(stack, "search_sources", { query: "agent state management", source_type: "official", limit: 3 });
    expect(await resultOf(stack, callId)).toMatchObject({ ok: true });
    const byService = await scrapeNames();
    const exported = new Set([...byService.values()].flatMap((s) => [...s]));
    // Each service declares its own metrics (a name from a service that does not serve it would mean a stale scrape).
    expect(byService.get("orchestrator")).toContain("toolgate_calls_total");
    expect(byService.get("policy")).toContain("toolgate_approvals_pending");
    expect(byService.get("executor-1")).toContain("toolgate_tool_execution_duration_seconds_bucket");
    expect(byService.get("audit")).toContain("toolgate_audit_verifications_total");

    const queries = dashboardQueries(dashboard());
    const missing = queries.flatMap((q) =>
      metricNamesOf(q.expr)
        .filter((name) => !exported.has(name) && !SYNTHESIZED.has(name))
        .map((name) => `${q.where}: ${name}`),
    );
    expect(missing, "metrics the dashboard queries that no service exports").toEqual([]);

    // A histogram is covered by any of its series; every other Toolgate metric by its own name.
    const used = new Set(queries.flatMap((q) => metricNamesOf(q.expr)).map((n) => n.replace(/_(bucket|sum|count)$/, "")));
    const toolgate = [...exported].filter((n) => n.startsWith("toolgate_") && !/_(bucket|sum|count)$/.test(n));
    expect(toolgate.length).toBeGreaterThan(15);
    expect(toolgate.filter((n) => !used.has(n)).sort(), "Toolgate metrics without a panel").toEqual([]);
  });
});
