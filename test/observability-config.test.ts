import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "@toolgate/testkit";
import { describe, expect, it } from "vitest";
import { dashboard, dashboardQueries, metricNamesOf, panelsOf, repoYaml } from "./fixtures/observability.js";

// The observability stack docker-compose.yml adds for users with Docker (there is no Docker engine here): the
// files parse, and what each names — services, ports, mounted files, data sources — is what the others define.
// That every metric the dashboard queries is served by the services is test/dashboard-metrics.e2e.test.ts.

interface ComposeService {
  image?: string;
  command?: string[];
  environment?: Record<string, string>;
  volumes?: string[];
  ports?: string[];
}
const compose = repoYaml<{ services: Record<string, ComposeService> }>("docker-compose.yml");
const TOOLGATE = ["orchestrator", "policy", "executor", "audit"];

/** A service's bind mounts from the repository: host path (relative to it) → container path. */
function mounts(service: string): Map<string, string> {
  const found = new Map<string, string>();
  for (const volume of compose.services[service]?.volumes ?? []) {
    const [host, container] = volume.split(":") as [string, string];
    if (host.startsWith("./")) found.set(host.slice(2), container);
  }
  return found;
}

/** The container path `file` (a repository path) is mounted at in `service`, directly or within a mounted folder. */
function mountedAt(service: string, file: string): string | undefined {
  for (const [host, container] of mounts(service)) {
    if (file === host) return container;
    if (file.startsWith(`${host}/`)) return `${container}${file.slice(host.length)}`;
  }
  return undefined;
}

const flag = (service: string, name: string) => compose.services[service]?.command?.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);

describe("docker-compose.yml's observability services", () => {
  it("are Prometheus, Grafana, an OpenTelemetry collector and Jaeger, each with a pinned image", () => {
    for (const service of ["prometheus", "grafana", "otel-collector", "jaeger"]) {
      expect(compose.services[service]?.image, service).toMatch(/^[a-z0-9./-]+:v?\d+\.\d+\.\d+$/);
    }
  });

  it("mount files that exist in the repository, where their commands look for them", () => {
    for (const service of ["prometheus", "grafana", "otel-collector"]) {
      expect(mounts(service).size, service).toBeGreaterThan(0);
      for (const host of mounts(service).keys()) expect(existsSync(join(REPO_ROOT, host)), `${service}: ${host}`).toBe(true);
    }
    expect(flag("prometheus", "config.file")).toBe(mountedAt("prometheus", "infra/prometheus/prometheus.yml"));
    expect(flag("otel-collector", "config")).toBe(mountedAt("otel-collector", "infra/otel/collector.yaml"));
    expect(mountedAt("grafana", "infra/grafana/provisioning")).toBe("/etc/grafana/provisioning");
    expect(statSync(join(REPO_ROOT, "infra/grafana/provisioning/datasources")).isDirectory()).toBe(true);
  });

  it("point every Toolgate service's OTLP exporter at the collector, which receives OTLP/HTTP on 4318 and exports to Jaeger", () => {
    for (const service of TOOLGATE) expect(compose.services[service]?.environment?.OTEL_EXPORTER_OTLP_ENDPOINT, service).toBe("http://otel-collector:4318");
    const collector = repoYaml<{
      receivers: { otlp: { protocols: { http: { endpoint: string } } } };
      exporters: Record<string, { endpoint?: string; tls?: { insecure?: boolean } }>;
      service: { pipelines: { traces: { receivers: string[]; processors?: string[]; exporters: string[] } } };
      processors?: Record<string, unknown>;
    }>("infra/otel/collector.yaml");
    // 0.0.0.0: the collector's default (localhost) would not be reachable from the services' containers.
    expect(collector.receivers.otlp.protocols.http.endpoint).toBe("0.0.0.0:4318");
    expect(compose.services["otel-collector"]?.ports).toContain("4318:4318");
    const traces = collector.service.pipelines.traces;
    expect(traces.receivers).toEqual(["otlp"]);
    for (const p of traces.processors ?? []) expect(collector.processors, p).toHaveProperty([p]);
    for (const e of traces.exporters) expect(collector.exporters, e).toHaveProperty([e]);
    const [jaegerHost, jaegerPort] = (collector.exporters["otlp/jaeger"]?.endpoint ?? "").split(":");
    expect(traces.exporters).toContain("otlp/jaeger");
    expect(compose.services[jaegerHost!]?.image).toMatch(/^jaegertracing\//);
    expect(jaegerPort).toBe("4317");
    expect(traces.exporters).toContain("debug");
  });
});

describe("infra/prometheus/prometheus.yml", () => {
  const prometheus = repoYaml<{
    scrape_configs: {
      job_name: string;
      metrics_path?: string;
      static_configs?: { targets: string[] }[];
      dns_sd_configs?: { names: string[]; type: string; port: number }[];
    }[];
  }>("infra/prometheus/prometheus.yml");
  const jobs = new Map(prometheus.scrape_configs.map((j) => [j.job_name, j]));

  it("scrapes each Toolgate service's /metrics on the port it listens on in docker-compose.yml", () => {
    expect([...jobs.keys()].sort()).toEqual(TOOLGATE.map((s) => `toolgate-${s}`).sort());
    for (const service of ["orchestrator", "policy", "audit"]) {
      const job = jobs.get(`toolgate-${service}`)!;
      expect(job.metrics_path ?? "/metrics").toBe("/metrics");
      const env = compose.services[service]!.environment!;
      expect(job.static_configs?.flatMap((c) => c.targets)).toEqual([`${service}:${env.HTTP_PORT}`]);
      expect(env.HTTP_HOST).toBe("0.0.0.0");
    }
  });

  it("finds every executor replica by DNS, on the metrics port the executors open", () => {
    const job = jobs.get("toolgate-executor")!;
    const executor = compose.services.executor!;
    expect(job.dns_sd_configs).toEqual([expect.objectContaining({ names: ["executor"], type: "A" })]);
    expect(String(job.dns_sd_configs![0]!.port)).toBe(executor.environment!.HTTP_PORT);
    // Reachable from Prometheus's container, and no host port: replicas of `--scale` would collide on it.
    expect(executor.environment!.HTTP_HOST).toBe("0.0.0.0");
    expect(executor.ports).toBeUndefined();
  });
});

describe("the Grafana provisioning and dashboard", () => {
  const datasources = repoYaml<{ datasources: { uid: string; type: string; url: string }[] }>("infra/grafana/provisioning/datasources/prometheus.yml");
  const providers = repoYaml<{ providers: { type: string; options: { path: string } }[] }>("infra/grafana/provisioning/dashboards/toolgate.yml");
  const d = dashboard();

  it("reads Prometheus from its compose service, and loads the dashboard from where it is mounted", () => {
    expect(datasources.datasources).toEqual([expect.objectContaining({ uid: "toolgate-prometheus", type: "prometheus", url: "http://prometheus:9090" })]);
    expect(compose.services.prometheus?.ports).toContain("9090:9090");
    const mounted = mountedAt("grafana", "infra/grafana/dashboards/toolgate.json");
    expect(mounted).toBeDefined();
    expect(mounted!.startsWith(`${providers.providers[0]!.options.path}/`)).toBe(true);
    expect(compose.services.grafana?.environment?.GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH).toBe(mounted);
  });

  it("queries that data source in every panel, each panel within the grid and with a query", () => {
    const panels = panelsOf(d);
    expect(new Set(panels.map((p) => p.id)).size).toBe(panels.length);
    for (const panel of panels) {
      expect(panel.gridPos.x + panel.gridPos.w, panel.title).toBeLessThanOrEqual(24);
      if (panel.type === "row") continue;
      expect(panel.datasource?.uid, panel.title).toBe("toolgate-prometheus");
      expect(panel.targets?.length, panel.title).toBeGreaterThan(0);
      for (const target of panel.targets ?? []) {
        expect(target.datasource?.uid ?? panel.datasource?.uid, panel.title).toBe("toolgate-prometheus");
        expect(target.expr?.trim(), panel.title).toBeTruthy();
      }
    }
    for (const variable of d.templating.list) expect(variable.datasource?.uid, variable.name).toBe("toolgate-prometheus");
    expect(dashboardQueries(d).length).toBeGreaterThan(25);
  });

  it("names its metrics in a way the metric-name reader understands (what the e2e check relies on)", () => {
    expect(
      metricNamesOf(
        'histogram_quantile(0.99, sum by (le, verdict) (rate(toolgate_policy_decision_duration_seconds_bucket{service=~"$service"}[$__rate_interval])))',
      ),
    ).toEqual(["toolgate_policy_decision_duration_seconds_bucket"]);
    expect(metricNamesOf('sum(rate(a_total{outcome!="ok"}[5m])) / clamp_min(sum(rate(b_total[5m])), 1e-9) and on (job) up{job=~"x.*"} offset 5m')).toEqual([
      "a_total",
      "b_total",
      "up",
    ]);
    expect(metricNamesOf("max(toolgate_approvals_pending)")).toEqual(["toolgate_approvals_pending"]);
    const used = new Set(dashboardQueries(d).flatMap((q) => metricNamesOf(q.expr)));
    expect(used.size).toBeGreaterThan(20);
    for (const name of used) expect(name, "a metric name the reader extracted").toMatch(/^(toolgate_|process_|nodejs_|up$)/);
  });
});
