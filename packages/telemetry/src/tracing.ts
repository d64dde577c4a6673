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
  /** `none` records no spans (events still carry their run's trace id); `console` prints finished spans. */
  exporter: "none" | "console";
  /**
   * Whether spans are created and carried across awaits (an async context manager). Defaults to whether there
   * is an exporter: without one, nothing would read the spans, and carrying a context through every promise
   * of every handler costs a fifth of a message's CPU.
   */
  spans?: boolean;
}

export interface Tracing {
  readonly tracer: Tracer;
  /** Whether spans are recorded and propagated in-process (see {@link TracingOptions.spans}). */
  readonly spans: boolean;
  shutdown(): Promise<void>;
}

/**
 * Registers the global tracer provider, W3C trace-context propagator and async context manager for this
 * process when spans are on; registers nothing when they are off. Call once from a composition root;
 * exporters beyond `console` plug in here.
 */
export function initTracing(options: TracingOptions): Tracing {
  const spans = options.spans ?? options.exporter !== "none";
  if (!spans) {
    return { tracer: trace.getTracer(`toolgate-${options.service}`), spans, shutdown: () => Promise.resolve() };
  }
  const spanProcessors: SpanProcessor[] = options.exporter === "console" ? [new SimpleSpanProcessor(new ConsoleSpanExporter())] : [];
  // Without an exporter nothing reads recorded spans: sample none, while trace ids still propagate.
  const sampler = new ParentBasedSampler({ root: options.exporter === "none" ? new AlwaysOffSampler() : new AlwaysOnSampler() });
  const provider = new BasicTracerProvider({ spanProcessors, sampler });
  const contextManager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(contextManager);
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(provider);
  return {
    tracer: trace.getTracer(`toolgate-${options.service}`),
    spans,
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
