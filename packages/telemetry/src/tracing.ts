import { context, propagation, trace, type Context, type Tracer } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BasicTracerProvider,
  ConsoleSpanExporter,
  ParentBasedSampler,
  SimpleSpanProcessor,
  type SpanProcessor,
} from "@opentelemetry/sdk-trace-base";

export interface TracingOptions {
  service: string;
  /** `none` keeps spans in-process (trace ids still propagate); `console` prints finished spans. */
  exporter: "none" | "console";
}

export interface Tracing {
  readonly tracer: Tracer;
  shutdown(): Promise<void>;
}

/**
 * Registers the global tracer provider, W3C trace-context propagator and async context manager for this
 * process. Call once from a composition root; exporters beyond `console` plug in here.
 */
export function initTracing(options: TracingOptions): Tracing {
  const spanProcessors: SpanProcessor[] = options.exporter === "console" ? [new SimpleSpanProcessor(new ConsoleSpanExporter())] : [];
  // Without an exporter nothing reads recorded spans: sample none, so spans cost almost nothing while trace
  // ids still propagate through every event's headers.
  const sampler = new ParentBasedSampler({ root: options.exporter === "none" ? new AlwaysOffSampler() : new AlwaysOnSampler() });
  const provider = new BasicTracerProvider({ spanProcessors, sampler });
  const contextManager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(contextManager);
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(provider);
  return {
    tracer: trace.getTracer(`toolgate-${options.service}`),
    async shutdown() {
      await provider.shutdown();
      contextManager.disable();
    },
  };
}

/** The trace id of the active span in `ctx`, for log correlation; undefined outside a trace. */
export function traceIdOf(ctx: Context = context.active()): string | undefined {
  const span = trace.getSpan(ctx);
  const id = span?.spanContext().traceId;
  return id && id !== "00000000000000000000000000000000" ? id : undefined;
}
