import { describe, expect, it } from "vitest";
import { BaseEnvSchema, ConfigError, parseEnv, tracingOptions } from "./config.js";

const options = (env: Record<string, string>) => tracingOptions("policy", parseEnv(BaseEnvSchema, env));

describe("tracingOptions", () => {
  it("makes no spans when nothing names an exporter or an endpoint", () => {
    expect(options({}).exporter).toBe("none");
    expect(options({}).otlp).toBeUndefined();
  });

  it("exports over OTLP once an endpoint is set, to its /v1/traces, as protobuf unless told JSON", () => {
    expect(options({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318/" })).toMatchObject({
      exporter: "otlp",
      otlp: { url: "http://collector:4318/v1/traces", protocol: "http/protobuf" },
    });
    // The traces endpoint is used as it is and wins; the traces protocol wins over the general one.
    expect(
      options({
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318",
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "https://traces.example/ingest",
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf",
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "http/json",
      }).otlp,
    ).toEqual({ url: "https://traces.example/ingest", protocol: "http/json" });
    // Named without an endpoint: the specification's default.
    expect(options({ OTEL_TRACES_EXPORTER: "otlp" }).otlp?.url).toBe("http://localhost:4318/v1/traces");
  });

  it("lets OTEL_TRACES_EXPORTER, the older TRACES_EXPORTER and OTEL_SDK_DISABLED decide", () => {
    expect(options({ TRACES_EXPORTER: "console" }).exporter).toBe("console");
    expect(options({ OTEL_TRACES_EXPORTER: "none", OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" }).exporter).toBe("none");
    expect(options({ OTEL_SDK_DISABLED: "true", OTEL_TRACES_EXPORTER: "otlp" }).exporter).toBe("none");
  });

  it("reads the service name, resource attributes and sampler", () => {
    expect(
      options({
        OTEL_SERVICE_NAME: "policy-eu",
        OTEL_RESOURCE_ATTRIBUTES: "deployment.environment=prod,team=a%2Cb",
        OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
        OTEL_TRACES_SAMPLER_ARG: "0.25",
        INSTANCE_ID: "policy-1",
      }),
    ).toMatchObject({
      serviceName: "policy-eu",
      instanceId: "policy-1",
      resourceAttributes: { "deployment.environment": "prod", team: "a,b" },
      sampler: { name: "parentbased_traceidratio", arg: 0.25 },
    });
  });

  it("exports in batches of 64 spans at least every 200 ms unless OTEL_BSP_* say otherwise", () => {
    expect(options({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" }).batch).toEqual({ maxExportBatchSize: 64, scheduledDelayMillis: 200 });
    expect(options({ OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "512", OTEL_BSP_SCHEDULE_DELAY: "5000" }).batch).toEqual({
      maxExportBatchSize: 512,
      scheduledDelayMillis: 5000,
    });
  });

  it("refuses what it cannot honour, naming the variable", () => {
    for (const env of [
      { OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" },
      { OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318" },
      { OTEL_TRACES_EXPORTER: "jaeger" },
      { OTEL_TRACES_SAMPLER_ARG: "2" },
      { OTEL_RESOURCE_ATTRIBUTES: "novalue" },
      { OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "0" },
      { OTEL_BSP_SCHEDULE_DELAY: "soon" },
    ]) {
      const variable = Object.keys(env)[0]!;
      expect(() => options(env), variable).toThrow(ConfigError);
      expect(() => options(env)).toThrow(new RegExp(variable));
    }
  });
});
