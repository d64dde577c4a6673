import { hash } from "node:crypto";
import { context, ROOT_CONTEXT, SpanKind, trace, TraceFlags, type Context, type Span, type SpanOptions, type Tracer } from "@opentelemetry/api";
import { RandomIdGenerator, SamplingDecision, type IdGenerator, type Sampler } from "@opentelemetry/sdk-trace-base";
import { stepContexts } from "./step-contexts.js";

const hexOf = (seed: string): string => hash("sha256", seed);

/**
 * The trace id of a run: the first 16 bytes of sha256 over the run id. Every service derives it alone, with or
 * without spans, so a run is one trace whichever process, request or restart its work happens in.
 */
export function runTraceId(runId: string): string {
  return hexOf(runId).slice(0, 32);
}

/** A span id derived from `seed` (the first 8 bytes of its sha256): a span others can name as parent without a word. */
export function spanIdOf(seed: string): string {
  return hexOf(seed).slice(0, 16);
}

/**
 * Random ids, except for the next span started after {@link seed}: its span id (and, for a root, trace id) are
 * the seeded ones. The SDK asks for both synchronously inside `startSpan`, so a seed never leaks to another span.
 */
export class SeededIdGenerator implements IdGenerator {
  readonly #random = new RandomIdGenerator();
  #traceId: string | undefined;
  #spanId: string | undefined;

  seed(spanId: string, traceId?: string): void {
    this.#spanId = spanId;
    this.#traceId = traceId;
  }

  clear(): void {
    this.#spanId = undefined;
    this.#traceId = undefined;
  }

  generateTraceId(): string {
    return this.#traceId ?? this.#random.generateTraceId();
  }

  generateSpanId(): string {
    const seeded = this.#spanId;
    this.#spanId = undefined;
    return seeded ?? this.#random.generateSpanId();
  }
}

/**
 * One trace per run, across the four services: the run's span (root, trace id {@link runTraceId}), a span per
 * model turn under it, and each call's proposal span under its turn, all with span ids derived from their ids.
 * Work done later or elsewhere (another replica, after a restart, a human's approval, an event published outside
 * any span) names its parent by id with these contexts instead of holding a span object. Exists only when spans
 * are on; sampling follows the configured root sampler, decided the same way for a run wherever it is asked.
 */
export class RunTraces {
  readonly #tracer: Tracer;
  readonly #ids: SeededIdGenerator;
  readonly #rootSampler: Sampler;

  constructor(tracer: Tracer, ids: SeededIdGenerator, rootSampler: Sampler) {
    this.#tracer = tracer;
    this.#ids = ids;
    this.#rootSampler = rootSampler;
  }

  /** The context of run `runId`'s span (remote: its object lives in the process that ends the run). */
  runContext(runId: string): Context {
    return this.#remote(runId, spanIdOf(`run:${runId}`));
  }

  /** The context of the span of model turn `turn` of run `runId`. */
  turnContext(runId: string, turn: number): Context {
    return this.#remote(runId, spanIdOf(`turn:${runId}:${turn}`));
  }

  /** The context of call `callId`'s proposal span, the parent of what happens to the call outside a message. */
  callContext(runId: string, callId: string): Context {
    return this.#remote(runId, spanIdOf(callId));
  }

  /** Starts the span of run `runId` (a root); its ids are the ones {@link runContext} names. */
  startRun(runId: string, name: string, options: SpanOptions): Span {
    return this.#seeded(name, options, ROOT_CONTEXT, spanIdOf(`run:${runId}`), runTraceId(runId));
  }

  /** Starts the span of turn `turn` under the run's span; its ids are the ones {@link turnContext} names. */
  startTurn(runId: string, turn: number, name: string, options: SpanOptions): Span {
    return this.#seeded(name, options, this.runContext(runId), spanIdOf(`turn:${runId}:${turn}`));
  }

  /** Starts call `callId`'s proposal span under `parent`; its ids are the ones {@link callContext} names. */
  startCall(callId: string, name: string, options: SpanOptions, parent: Context): Span {
    return this.#seeded(name, options, parent, spanIdOf(callId));
  }

  /** Starts a span with a random id under `parent` (by default the active context). */
  start(name: string, options: SpanOptions, parent?: Context): Span {
    return this.#tracer.startSpan(name, options, parent);
  }

  /**
   * Runs `fn` as the step of `key` (`stepKey`) in `span`: what it publishes about that call or run, also after
   * an await, is the span's child, and its events are recorded on it.
   */
  within<T>(key: string, span: Span, fn: () => Promise<T>): Promise<T> {
    return stepContexts.run(key, trace.setSpan(context.active(), span), fn);
  }

  #seeded(name: string, options: SpanOptions, parent: Context, spanId: string, traceId?: string): Span {
    this.#ids.seed(spanId, traceId);
    try {
      return this.#tracer.startSpan(name, options, parent);
    } finally {
      this.#ids.clear();
    }
  }

  #remote(runId: string, spanId: string): Context {
    const traceId = runTraceId(runId);
    const sampled = this.#rootSampler.shouldSample(ROOT_CONTEXT, traceId, "run", SpanKind.INTERNAL, {}, []).decision === SamplingDecision.RECORD_AND_SAMPLED;
    return trace.setSpanContext(ROOT_CONTEXT, { traceId, spanId, traceFlags: sampled ? TraceFlags.SAMPLED : TraceFlags.NONE, isRemote: true });
  }
}
