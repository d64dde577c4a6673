import { context, propagation, trace, type Context, type Tracer } from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { OTLPTraceExporter as OtlpJsonExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { OTLPTraceExporter as OtlpProtobufExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { defaultResource, resourceFromAttributes } from "@opentelemetry/resources";
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BasicTracerProvider,
  BatchSpanProcessor,
  ConsoleSpanExporter,
  ParentBasedSampler,
  SimpleSpanProcessor,
  TraceIdRatioBasedSampler,
  type Sampler,
  type SpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { RunTraces, SeededIdGenerator } from "./run-traces.js";
import { SyncContextManager } from "./step-contexts.js";

/** `OTEL_TRACES_SAMPLER` values (the specification's, minus the Jaeger remote sampler). */
export const TRACE_SAMPLERS = [
  "always_on",
  "always_off",
  "traceidratio",
  "parentbased_always_on",
  "parentbased_always_off",
  "parentbased_traceidratio",
] as const;
export type TraceSamplerName = (typeof TRACE_SAMPLERS)[number];

export interface TracingOptions {
  service: string;
  /**
   * `none` records no spans (events still carry their run's trace id); `console` prints finished spans;
   * `otlp` exports them in batches over OTLP/HTTP (see {@link otlp}).
   */
  exporter: "none" | "console" | "otlp";
  /** Where and how `otlp` exports: the full traces URL (`…/v1/traces`) and the body's encoding. */
  otlp?: { url: string; protocol: "http/protobuf" | "http/json" };
  /** `service.name` of the spans (`OTEL_SERVICE_NAME`); default `toolgate-<service>`. */
  serviceName?: string;
  /** `service.instance.id` of the spans. */
  instanceId?: string;
  /** More resource attributes (`OTEL_RESOURCE_ATTRIBUTES`); `service.name` here loses to {@link serviceName}. */
  resourceAttributes?: Record<string, string>;
  /** `OTEL_TRACES_SAMPLER` and its argument (the ratio of the `traceidratio` ones); default `parentbased_always_on`. */
  sampler?: { name: TraceSamplerName; arg?: number | undefined };
  /**
   * How `otlp` batches (`OTEL_BSP_MAX_EXPORT_BATCH_SIZE`, `OTEL_BSP_SCHEDULE_DELAY`); unset, the SDK's own defaults
   * (512 spans, 5 s) or those variables. The queue's size and the export timeout stay the SDK's (`OTEL_BSP_*`).
   */
  batch?: { maxExportBatchSize: number; scheduledDelayMillis: number };
  /** Replaces the exporter's processor (tests that read what was recorded); spans are then on. */
  spanProcessor?: SpanProcessor;
  /**
   * Whether spans are created and carried from a step to what it publishes (`StepContexts`). Defaults to whether
   * there is an exporter: without one, nothing would read the spans.
   */
  spans?: boolean;
}

export interface Tracing {
  readonly tracer: Tracer;
  /** Whether spans are recorded and propagated in-process (see {@link TracingOptions.spans}). */
  readonly spans: boolean;
  /** The run's trace and the spans of its turns and calls; undefined when spans are off (nothing to make). */
  readonly runs: RunTraces | undefined;
  /** Ends tracing: spans still queued are exported first (bounded by the exporter's timeout). */
  shutdown(): Promise<void>;
}

/**
 * Registers the global tracer provider, W3C trace-context propagator and a synchronous context manager (see
 * `SyncContextManager`) for this process when spans are on; registers nothing when they are off. Call once from a composition root. Spans
 * go to the exporter through a batch processor (`OTEL_BSP_*` tune it; the OTLP exporter reads
 * `OTEL_EXPORTER_OTLP_HEADERS`, `_TIMEOUT`, `_COMPRESSION` and the certificate variables itself).
 */
export function initTracing(options: TracingOptions): Tracing {
  const spans = options.spans ?? (options.exporter !== "none" || options.spanProcessor !== undefined);
  if (!spans) {
    return { tracer: trace.getTracer(`toolgate-${options.service}`), spans, runs: undefined, shutdown: () => Promise.resolve() };
  }
  const spanProcessors: SpanProcessor[] = options.spanProcessor ? [options.spanProcessor] : exporterProcessors(options);
  // Without an exporter nothing reads recorded spans: sample none, while trace ids still propagate.
  const root = options.exporter === "none" && !options.spanProcessor ? new AlwaysOffSampler() : rootSampler(options.sampler);
  const sampler = isParentBased(options.sampler) || options.exporter === "none" ? new ParentBasedSampler({ root }) : root;
  const idGenerator = new SeededIdGenerator();
  const resource = defaultResource().merge(
    resourceFromAttributes({
      ...options.resourceAttributes,
      "service.name": options.serviceName ?? options.resourceAttributes?.["service.name"] ?? `toolgate-${options.service}`,
      "service.namespace": options.resourceAttributes?.["service.namespace"] ?? "toolgate",
      ...(options.instanceId ? { "service.instance.id": options.instanceId } : {}),
    }),
  );
  const provider = new BasicTracerProvider({ spanProcessors, sampler, idGenerator, resource });
  const contextManager = new SyncContextManager();
  context.setGlobalContextManager(contextManager);
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(provider);
  const tracer = trace.getTracer(`toolgate-${options.service}`);
  return {
    tracer,
    spans,
    runs: new RunTraces(tracer, idGenerator, root),
    async shutdown() {
      await provider.shutdown();
      contextManager.disable();
    },
  };
}

function exporterProcessors(options: TracingOptions): SpanProcessor[] {
  switch (options.exporter) {
    case "none":
      return [];
    case "console":
      return [new SimpleSpanProcessor(new ConsoleSpanExporter())];
    case "otlp": {
      if (!options.otlp) throw new Error("the otlp exporter needs a URL");
      const { url, protocol } = options.otlp;
      const exporter = protocol === "http/json" ? new OtlpJsonExporter({ url }) : new OtlpProtobufExporter({ url });
      return [new BatchSpanProcessor(exporter, options.batch)];
    }
  }
}

function isParentBased(sampler: TracingOptions["sampler"]): boolean {
  return sampler === undefined || sampler.name.startsWith("parentbased_");
}

/** The sampler that decides a trace's root (a run): the one the parent-based samplers delegate to. */
function rootSampler(sampler: TracingOptions["sampler"]): Sampler {
  switch (sampler?.name ?? "parentbased_always_on") {
    case "always_off":
    case "parentbased_always_off":
      return new AlwaysOffSampler();
    case "traceidratio":
    case "parentbased_traceidratio":
      return new TraceIdRatioBasedSampler(sampler?.arg ?? 1);
    default:
      return new AlwaysOnSampler();
  }
}

/** The trace id of the active span in `ctx`, for log correlation; undefined outside a trace. */
export function traceIdOf(ctx: Context = context.active()): string | undefined {
  const span = trace.getSpan(ctx);
  const id = span?.spanContext().traceId;
  return id && id !== "00000000000000000000000000000000" ? id : undefined;
}
