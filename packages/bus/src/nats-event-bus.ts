import {
  context,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Span,
  type TextMapGetter,
  type TextMapSetter,
} from "@opentelemetry/api";
import {
  AckPolicy,
  DeliverPolicy,
  DiscardPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  jetstream,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
  type ConsumerConfig,
  type ConsumerInfo,
  type ConsumerMessages,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
  type StreamConfig,
  type StreamInfo,
} from "@nats-io/jetstream";
import { headers as natsHeaders, nanos, type MsgHdrs, type NatsConnection } from "@nats-io/nats-core";
import { connect } from "@nats-io/transport-node";
import {
  EVENT_SIGNATURE_HEADER,
  messageDigest,
  parseEvent,
  refusalEventId,
  signatureKeyId,
  type CallEventType,
  type EventRejection,
  type EventSigner,
  type EventTrust,
  type RunEventType,
  type SignatureFacts,
  type SignatureProblem,
  type SubjectCatalogue,
  type ToolgateEvent,
} from "@toolgate/contracts";
import { epochMicros, RuntimeStats, runTraceId, spanIdOf, stepContexts, stepKey, type Logger, type RunTraces } from "@toolgate/telemetry";
import { ackAction, serverMaxDeliver, type Disposition } from "./disposition.js";
import { eventAttributes, eventFacts, stepAttributes } from "./event-spans.js";
import type {
  ConsumerLag,
  ConsumerSpec,
  Delivery,
  EventBus,
  EventHandler,
  PublishReceipt,
  RejectionHandler,
  StepSpan,
  Subscription,
  Worker,
} from "./event-bus.js";
import { seedAuthenticator } from "./nats-identities.js";
import { readMonitoredServers, streamSettingsRefusals, syncRefusals, versionRefusal, type NatsRefusal } from "./server-guards.js";

/**
 * A publish that was not acknowledged by the stream. Safe to retry when `retryable` (event ids are
 * deterministic, so the duplicate window drops a retry that did land); an event above the size limit is not.
 */
export class PublishError extends Error {
  readonly code = "PUBLISH_FAILED";
  readonly retryable: boolean;
  constructor(message: string, options?: ErrorOptions & { retryable?: boolean }) {
    super(message, options);
    this.name = "PublishError";
    this.retryable = options?.retryable ?? true;
  }
}

/** A history read that did not get every stored event in time: named as the client's timeouts are (NATS not answering). */
class HistoryTimeoutError extends Error {
  readonly code = "HISTORY_TIMEOUT";
  override readonly name = "TimeoutError";
}

/** The stream's durability settings; production runs R3 with `sync_interval: always` on the server. */
export interface StreamSettings {
  replicas: number;
  maxAgeMs: number;
  duplicateWindowMs: number;
}

export interface NatsEventBusOptions {
  servers: string;
  /** Connection name shown by the server (service and instance). */
  name: string;
  subjects: SubjectCatalogue;
  /**
   * The service's NATS identity (an nkey seed, `SU…`): the server then holds the connection to that identity's
   * subject permissions ({@link natsPermissions}). Without it the connection is anonymous.
   */
  nkeySeed?: string;
  /**
   * A PEM file of the CA that signed the servers' certificates: the connection then requires TLS and verifies
   * the server against it (never against the system's CAs alone). Without it the connection is plain TCP.
   */
  tlsCaFile?: string;
  /** Messages above this size are refused before parsing. */
  maxEventBytes: number;
  stream: StreamSettings;
  logger: Logger;
  /** The longest one publish waits for its acknowledgement, over all its attempts (see {@link publishAttempts}). */
  publishTimeoutMs?: number;
  /** Counts publishes and deliveries by event type (and records their spans when tracing). */
  stats?: RuntimeStats;
  /**
   * Whether handlers run in a span continuing the publisher's trace, and publishes carry the active span's
   * context (an OpenTelemetry setup with spans on). Without, every event still carries a W3C traceparent: its
   * run's trace id (derived from the run id, so every service agrees without a word) and a span id derived
   * from the event id.
   */
  traceSpans?: boolean;
  /**
   * With spans: whether every hop has spans of its own, as the messaging conventions describe them (a producer
   * span per publish, a consumer span per message handled, the step's span its child). Without (the default),
   * a call's trace holds its steps only: a step's span is the consumer span of the message that started it, and
   * what it publishes is an event of that span and carries its context. A hop costs two spans per consumer of
   * it; a call crosses about a dozen.
   */
  traceHops?: boolean;
  /**
   * With spans: the parent of an event published, or a message handled, outside any span (a run's events, an
   * approver's decision, a publisher without spans) — its run's span, so every span of a run is in its trace.
   */
  runTraces?: Pick<RunTraces, "runContext">;
  /**
   * Monitoring URLs (`http://host:8222`) of the servers, for the guard that checks each one syncs every write:
   * a client learns a server's `sync_interval` only from its `/varz`. Required for a cluster.
   */
  monitorUrls?: readonly string[];
  /** The oldest server version accepted (default 2.12.3); below 2.10 is always refused. */
  minServerVersion?: string;
  /**
   * Asked for each guard's refusal at connect; true lets the bus start anyway (the caller logs why). Without it
   * every refusal is thrown. A server below 2.10 is refused whatever this says.
   */
  allowUnsafe?: (refusal: NatsRefusal) => boolean;
  /** Signs every event this process publishes (its service's key): consumers accept an event only from its owner. */
  signer?: EventSigner;
  /**
   * The keys trusted to sign events, by role. With it every consumer (unless it says otherwise), `watch` and
   * `lastEvent` pass on only events signed by a key of their owner's role; a consumer reports what it refuses.
   */
  trust?: EventTrust;
}

const encoder = new TextEncoder();
/**
 * Room for the headers every publish carries (Nats-Msg-Id, traceparent, tracestate) on top of the event:
 * the server counts headers against the stream's max_msg_size, the event limit does not.
 */
const HEADER_ALLOWANCE_BYTES = 4 * 1024;
/** Client pings: a connection with this many pings unanswered, this far apart, is stale and replaced. */
const PING_INTERVAL_MS = 2_000;
const MAX_PINGS_OUT = 3;
/** How long one pull request waits at the server; also the library's delay between consumer checks after a reconnect. */
const PULL_EXPIRES_MS = 5_000;
/** How long a history read waits for the messages its consumer had pending, and after how long idle the server drops it. */
const HISTORY_FETCH_MS = 5_000;
const HISTORY_IDLE_MS = 30_000;
/** What a handler came to: how to settle its message, or the error it threw (redelivered). */
type HandlerOutcome = { disposition: Disposition } | { error: unknown };

const headerSetter: TextMapSetter<MsgHdrs> = { set: (h, k, v) => h.set(k, v) };
const headerGetter: TextMapGetter<MsgHdrs | undefined> = {
  get: (h, k) => (h?.has(k) ? h.get(k) : undefined),
  keys: (h) => (h ? h.keys() : []),
};

/**
 * How long a JetStream request waits for its answer before it is sent again (a publish) or given up on (the
 * library's consumer check). A request sent at the moment a restarted server comes back goes unanswered: each
 * consumer checks itself with one on every reconnect and pulls only once that check answers, so this wait is
 * how long every consumer stands still after a NATS restart (measured: delivery resumes this long plus ~0.1 s
 * after the server is back; with the library's 5 s, 5.1 s).
 */
export const JS_REQUEST_TIMEOUT_MS = 1_000;

/** How long each attempt of a publish waits for its acknowledgement, and how many attempts it makes. */
export interface PublishAttempts {
  timeout: number;
  retries: number;
}

/**
 * Attempts of at most {@link JS_REQUEST_TIMEOUT_MS} that add up to `totalMs`: a publish that went unanswered
 * (sent while the connection was down, or as the server came back) is sent again within a second instead of
 * holding its caller for the whole budget. Every attempt carries the same message id, so the stream stores the
 * message once however many attempts reach it (the library retries only timeouts and "no responders", with
 * its own short backoff).
 */
export function publishAttempts(totalMs: number): PublishAttempts {
  const timeout = Math.min(JS_REQUEST_TIMEOUT_MS, totalMs);
  return { timeout, retries: Math.max(1, Math.round(totalMs / timeout)) };
}

/**
 * {@link EventBus} over NATS JetStream. One stream holds every call and run event; consumers are durable,
 * explicitly acknowledged, created idempotently at start-up; every publish carries `Nats-Msg-Id` (the event
 * id) and W3C trace context, and awaits its PubAck.
 */
export class NatsEventBus implements EventBus {
  readonly #nc: NatsConnection;
  readonly #js: JetStreamClient;
  readonly #jsm: JetStreamManager;
  /** The durable consumers this process works on (for {@link consumerLag}). */
  readonly #durables = new Set<string>();
  readonly #options: NatsEventBusOptions;
  readonly #log: Logger;
  readonly #stats: RuntimeStats;
  readonly #tracer = trace.getTracer("toolgate-bus");
  readonly #attempts: PublishAttempts;
  #connected = true;

  private constructor(nc: NatsConnection, jsm: JetStreamManager, options: NatsEventBusOptions) {
    this.#nc = nc;
    this.#jsm = jsm;
    this.#js = jetstream(nc, { timeout: JS_REQUEST_TIMEOUT_MS });
    this.#attempts = publishAttempts(options.publishTimeoutMs ?? 5_000);
    this.#options = options;
    this.#log = options.logger.child({ component: "bus" });
    this.#stats = options.stats ?? new RuntimeStats();
    this.#watchStatus().catch((error: unknown) => this.#log.error({ err: error }, "NATS status watch ended"));
  }

  /** False from a lost connection until the client has reconnected (or for good once closed). */
  get connected(): boolean {
    return this.#connected && !this.#nc.isClosed();
  }

  /**
   * Logs each change of the connection's state once: the loss, the reconnection, and the server's errors —
   * never once per reconnect attempt, which the client makes every few hundred milliseconds.
   */
  async #watchStatus(): Promise<void> {
    let lostAt = 0;
    for await (const status of this.#nc.status()) {
      switch (status.type) {
        case "disconnect":
          if (this.#connected) {
            this.#connected = false;
            lostAt = Date.now();
            this.#stats.add("bus.disconnected");
            this.#log.warn({ server: status.server }, "NATS connection lost; reconnecting (publishes fail until it is back)");
          }
          break;
        case "reconnect":
          if (!this.#connected) {
            this.#connected = true;
            this.#log.warn({ server: status.server, down_ms: Date.now() - lostAt }, "NATS connection restored");
          }
          break;
        case "ldm":
          this.#log.warn({ server: status.server }, "NATS server entering lame-duck mode");
          break;
        case "error":
          this.#log.warn({ err: status.error }, "NATS server reported an error");
          break;
        case "staleConnection":
          this.#log.warn("NATS connection stale (no pong); reconnecting");
          break;
        case "slowConsumer":
          this.#log.warn({ subject: status.sub.getSubject(), pending: status.pending }, "NATS slow consumer");
          break;
        default:
          break;
      }
    }
    this.#connected = false;
  }

  /** Connects and makes sure the event stream exists with the configured settings. */
  static async connect(options: NatsEventBusOptions): Promise<NatsEventBus> {
    // No async stack traces: building one per request costs a fifth of a publisher's CPU, for a trace no
    // handler reads (a publish that fails is reported with its event id). Reconnect attempts every half second
    // (the client's default is 2 s): a restarted server gets its clients back, and the work they hold moving,
    // within a second. A server that stops answering without closing the connection (paused, partitioned) is
    // given up after three unanswered pings 2 s apart (the client's default waits 2 min per ping): its clients
    // move to another node within ~8 s instead of stalling for minutes.
    const nc = await connect({
      servers: options.servers.split(","),
      name: options.name,
      ...(options.nkeySeed ? { authenticator: seedAuthenticator(options.nkeySeed) } : {}),
      ...(options.tlsCaFile ? { tls: { caFile: options.tlsCaFile } } : {}),
      maxReconnectAttempts: -1,
      reconnectTimeWait: 500,
      pingInterval: PING_INTERVAL_MS,
      maxPingOut: MAX_PINGS_OUT,
      noAsyncTraces: true,
    });
    try {
      const refuse = (refusal: NatsRefusal | undefined): void => refuseUnless(options, refusal);
      refuse(versionRefusal(`${nc.info?.server_name ?? "unknown"} at ${nc.getServer()}`, nc.info?.version ?? "unknown", options.minServerVersion));
      const jsm = await jetstreamManager(nc);
      const bus = new NatsEventBus(nc, jsm, options);
      const stream = await bus.#ensureStream(refuse);
      await bus.#checkSync(stream, refuse);
      return bus;
    } catch (error) {
      await nc.close();
      throw error;
    }
  }

  get connection(): NatsConnection {
    return this.#nc;
  }

  /**
   * Creates the event stream, or brings an existing one's limits in line with ours. Replicas and storage are
   * never changed here: a stream that differs is a guard's refusal (scaling a live stream is an operator's act,
   * and two services configured differently must not take turns resizing it).
   */
  async #ensureStream(refuse: (refusal: NatsRefusal | undefined) => void): Promise<StreamInfo> {
    const { subjects, stream, maxEventBytes } = this.#options;
    const config: Partial<StreamConfig> & { name: string } = {
      name: subjects.stream,
      subjects: [subjects.allCalls, subjects.allRuns],
      retention: RetentionPolicy.Limits,
      storage: StorageType.File,
      discard: DiscardPolicy.Old,
      num_replicas: stream.replicas,
      max_age: nanos(stream.maxAgeMs),
      duplicate_window: nanos(stream.duplicateWindowMs),
      max_msg_size: maxEventBytes + HEADER_ALLOWANCE_BYTES,
    };
    try {
      return await this.#jsm.streams.add(config);
    } catch (error) {
      // Another replica created it first, or it exists with older settings: converge on ours.
      if (!(error instanceof JetStreamApiError)) throw error;
    }
    const existing = await this.#jsm.streams.info(config.name);
    for (const refusal of streamSettingsRefusals(existing, stream.replicas)) refuse(refusal);
    // Storage is not updatable at all; replicas stay as found (the refusal above was overridden, or they match).
    const { storage: _storage, ...updatable } = config;
    return this.#jsm.streams.update(config.name, { ...updatable, num_replicas: existing.config.num_replicas });
  }

  /**
   * Applies the stream-settings guard to another stream of the deployment (the contract catalog's): throws
   * `StreamSettingsError` when its replicas or storage differ from `replicas` / file, unless allowed like the
   * event stream's. A stream that does not exist passes.
   */
  async checkStreamSettings(stream: string, replicas: number): Promise<void> {
    let info: StreamInfo;
    try {
      info = await this.#jsm.streams.info(stream);
    } catch (error) {
      if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound) return;
      throw error;
    }
    for (const refusal of streamSettingsRefusals(info, replicas)) refuseUnless(this.#options, refusal);
  }

  /** Refuses servers holding the stream that do not sync every write (see {@link syncRefusals}). */
  async #checkSync(stream: StreamInfo, refuse: (refusal: NatsRefusal | undefined) => void): Promise<void> {
    const urls = this.#options.monitorUrls ?? [];
    const clustered = this.#nc.info?.cluster !== undefined;
    if (urls.length === 0 && !clustered) return;
    const servers = await readMonitoredServers(urls);
    if (!Array.isArray(servers)) return refuse(servers);
    for (const server of servers) refuse(versionRefusal(`${server.name} at ${server.url}`, server.version, this.#options.minServerVersion));
    for (const refusal of syncRefusals(servers, stream, clustered)) refuse(refusal);
  }

  async publish(event: ToolgateEvent): Promise<PublishReceipt> {
    const { subjects } = this.#options;
    const subject = event.kind === "call" ? subjects.call(event.call_id, event.type) : subjects.run(event.run_id, event.type);
    const data = encoder.encode(JSON.stringify(event));
    if (data.byteLength > this.#options.maxEventBytes) {
      throw new PublishError(`event ${event.id} is ${data.byteLength} bytes, above the ${this.#options.maxEventBytes} limit`, { retryable: false });
    }
    const h = natsHeaders();
    let span: Span | undefined;
    if (!this.#options.traceSpans) h.set("traceparent", runTraceParent(event));
    else span = this.#tracePublish(event, subject, data.byteLength, h);
    const signer = this.#options.signer;
    if (signer) h.set(EVENT_SIGNATURE_HEADER, signer.sign(messageDigest(data)));
    this.#stats.add(`bus.publish.${event.kind}.${event.type}`);
    const started = this.#stats.tracing ? epochMicros() : 0;
    let ack: { seq: number; duplicate: boolean };
    try {
      ack = await this.#js.publish(subject, data, { msgID: event.id, headers: h, ...this.#attempts });
    } catch (error) {
      span?.setStatus({ code: SpanStatusCode.ERROR, message: "not acknowledged" }).end();
      throw new PublishError(`publish of ${event.id} to ${subject} was not acknowledged`, { cause: error });
    }
    span?.setAttribute("toolgate.duplicate", ack.duplicate).end();
    if (started > 0) this.#stats.record("out", event.id, started, epochMicros());
    if (!ack.duplicate) return { seq: ack.seq, duplicate: false };
    this.#stats.add("bus.publish_duplicate");
    if (!(await this.#idTakenByForgery(ack.seq))) return { seq: ack.seq, duplicate: true };
    // Whoever published first under this id is not the event's owner: the duplicate window must not swallow the
    // real transition, so it goes out under a message id of its own (consumers and audit know it by its event id).
    this.#log.warn(
      { ...logIds(event), event_id: event.id, stream_seq: ack.seq },
      "event id taken by a message its owner did not sign; published under another message id",
    );
    const msgID = `${event.id}~${messageDigest(data).toString("hex").slice(0, 16)}`;
    try {
      const again = await this.#js.publish(subject, data, { msgID, headers: h, ...this.#attempts });
      return { seq: again.seq, duplicate: again.duplicate };
    } catch (error) {
      throw new PublishError(`publish of ${event.id} to ${subject} was not acknowledged`, { cause: error });
    }
  }

  /**
   * Puts a publish in its trace: the step that publishes records the event as a span event and takes its
   * attributes (see `stepAttributes`), and the message carries the step's context — or, with hops traced, the
   * context of a producer span of its own (messaging conventions), returned to be ended on the ack. The step is
   * the active span, or else the step working on the event's call or run (`stepContexts`: a step publishes after
   * its awaits). Outside any step the parent is the event's run.
   */
  #tracePublish(event: ToolgateEvent, subject: string, bytes: number, h: MsgHdrs): Span | undefined {
    let active = context.active();
    let step = trace.getSpan(active);
    if (!step) {
      active = stepContexts.get(eventStepKey(event)) ?? active;
      step = trace.getSpan(active);
    }
    if (step?.isRecording()) step.addEvent(event.type, eventFacts(event)).setAttributes(stepAttributes(event));
    const parent = step || !this.#options.runTraces ? active : this.#options.runTraces.runContext(event.run_id);
    if (!this.#options.traceHops) {
      propagation.inject(parent, h, headerSetter);
      return undefined;
    }
    const template = destinationTemplate(subject, event);
    const attributes = eventAttributes(event);
    attributes["messaging.system"] = "nats";
    attributes["messaging.operation.type"] = "send";
    attributes["messaging.operation.name"] = "publish";
    attributes["messaging.destination.name"] = subject;
    attributes["messaging.destination.template"] = template;
    attributes["messaging.message.id"] = event.id;
    attributes["messaging.message.body.size"] = bytes;
    const span = this.#tracer.startSpan(`publish ${template}`, { kind: SpanKind.PRODUCER, attributes }, parent);
    propagation.inject(trace.setSpan(parent, span), h, headerSetter);
    return span;
  }

  /**
   * Whether the message the duplicate window kept under an id (at `seq`) is not signed by its event's owner. Only
   * asked with a trust list, and only for duplicates (a retry after a lost acknowledgement, a redelivered handler).
   */
  async #idTakenByForgery(seq: number): Promise<boolean> {
    const trust = this.#options.trust;
    if (!trust) return false;
    const stored = await this.#jsm.streams.getMessage(this.#options.subjects.stream, { seq }).catch(() => null);
    if (!stored) return false;
    const parsed = parseEvent(stored.data, this.#options.maxEventBytes);
    if (!parsed.ok) return true;
    return trust.check(parsed.event, signatureFacts(stored.header, stored.data)) !== undefined;
  }

  /** Runs a JetStream request again while it times out (each attempt waits {@link JS_REQUEST_TIMEOUT_MS}), within the publish budget. */
  async #withRetries<T>(request: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await request();
      } catch (error) {
        if (!(error instanceof Error && error.name === "TimeoutError") || attempt >= this.#attempts.retries) throw error;
      }
    }
  }

  async lastEvent(kind: "call" | "run", id: string, type: string): Promise<ToolgateEvent | undefined> {
    const { subjects } = this.#options;
    const subject = kind === "call" ? subjects.call(id, type as CallEventType) : subjects.run(id, type as RunEventType);
    this.#stats.add("bus.read_last");
    // null when no message is stored under the subject; any other failure to read the stream throws.
    const stored = await this.#jsm.streams.getMessage(subjects.stream, { last_by_subj: subject });
    if (!stored) return undefined;
    const parsed = parseEvent(stored.data, this.#options.maxEventBytes);
    if (!parsed.ok || subjectMismatch(subjects, stored.subject, parsed.event)) return undefined;
    const problem = this.#options.trust?.check(parsed.event, signatureFacts(stored.header, stored.data));
    if (problem) {
      this.#log.warn({ ...logIds(parsed.event), event_id: parsed.event.id, stream_seq: stored.seq, problem }, "stored event not signed by its owner; ignored");
      return undefined;
    }
    return parsed.event;
  }

  async history(filters: readonly string[], limit: number): Promise<{ events: ToolgateEvent[]; truncated: boolean }> {
    if (filters.length === 0 || limit < 1) return { events: [], truncated: false };
    const { subjects } = this.#options;
    this.#stats.add("bus.read_history");
    // An ephemeral consumer with no acks, in memory, removed right after (or by the server once idle, should
    // this process die first): what it has pending when created is exactly what is read.
    const info = await this.#jsm.consumers.add(subjects.stream, {
      filter_subjects: [...filters],
      deliver_policy: DeliverPolicy.All,
      ack_policy: AckPolicy.None,
      mem_storage: true,
      num_replicas: 1,
      inactive_threshold: nanos(HISTORY_IDLE_MS),
    });
    const events: ToolgateEvent[] = [];
    try {
      const wanted = Math.min(info.num_pending, limit);
      if (wanted > 0) {
        const consumer = await this.#js.consumers.get(subjects.stream, info.name);
        const messages = await consumer.fetch({ max_messages: wanted, expires: HISTORY_FETCH_MS });
        let read = 0;
        for await (const msg of messages) {
          read += 1;
          const parsed = parseEvent(msg.data, this.#options.maxEventBytes);
          if (parsed.ok && !subjectMismatch(subjects, msg.subject, parsed.event)) {
            const problem = this.#options.trust?.check(parsed.event, signatureFacts(msg.headers, msg.data));
            if (problem) this.#stats.add("bus.refused.history");
            else events.push(parsed.event);
          }
          if (read >= wanted) break;
        }
        if (read < wanted) throw new HistoryTimeoutError(`read ${read} of ${wanted} stored events within ${HISTORY_FETCH_MS} ms`);
      }
    } finally {
      await this.#jsm.consumers.delete(subjects.stream, info.name).catch((error: unknown) => {
        this.#log.debug({ err: error, consumer: info.name }, "history consumer not deleted; the server removes it once idle");
      });
    }
    return { events, truncated: info.num_pending > limit };
  }

  async consumerLag(): Promise<ConsumerLag[]> {
    return Promise.all(
      [...this.#durables].map(async (consumer) => {
        const info = await this.#jsm.consumers.info(this.#options.subjects.stream, consumer);
        return { consumer, pending: info.num_pending, ackPending: info.num_ack_pending, redelivered: info.num_redelivered };
      }),
    );
  }

  async consume(spec: ConsumerSpec, handler: EventHandler, onRejected?: RejectionHandler): Promise<Worker> {
    const durable = spec.name;
    this.#durables.add(durable);
    const inFlight = new Set<Promise<void>>();
    // Delivered beyond the slots: waiting here, in delivery order, for a handler to finish.
    const waiting: JsMsg[] = [];
    let subscription: ConsumerMessages | undefined;
    let stopping = false;
    // Every message this process holds (handled or waiting), with when the server last heard it is in hand.
    const held = new Map<JsMsg, number>();

    const run = (msg: JsMsg): void => {
      const task = this.#handle(msg, spec, handler, onRejected)
        .catch((error: unknown) => this.#log.error({ err: error, consumer: durable }, "message handling failed"))
        .finally(() => {
          held.delete(msg);
          inFlight.delete(task);
          const next = stopping ? undefined : waiting.shift();
          if (next) run(next);
        });
      inFlight.add(task);
    };
    // Called synchronously for each message of a socket read, so the acks and publishes the handlers start in
    // one read leave in one write. It must not throw: a throwing callback ends the subscription.
    const deliver = (msg: JsMsg) => {
      // Messages arriving after stop() go back to the stream at once, for another replica, instead of waiting
      // out the ack wait.
      if (stopping) {
        msg.nak();
        return;
      }
      held.set(msg, Date.now());
      if (inFlight.size < spec.slots) run(msg);
      else waiting.push(msg);
    };

    await this.#ensureConsumer(spec);
    const consumer = await this.#withRetries(() => this.#js.consumers.get(this.#options.subjects.stream, durable));
    // Ask for no more than the slots: replicas sharing the consumer then share its messages (one that asked for
    // more would hold messages back while another stands idle). The library asks again as messages arrive,
    // so the next one is usually here when a slot frees up.
    // Pulls expire after 5 s instead of the library's 30 s: after a reconnect the library checks the consumer
    // before pulling again and, when that check fails (its leader was on the node that went away and a new one is
    // being elected), waits one `expires` before the next check — 30 s of a consumer standing still by default.
    subscription = await consumer.consume({ max_messages: spec.slots, expires: PULL_EXPIRES_MS, callback: deliver });
    const keepAlive = heldMessagesKeepAlive(held, spec.ackWaitMs);
    const stop = async (): Promise<void> => {
      stopping = true;
      await subscription?.close();
      subscription = undefined;
      for (const msg of waiting.splice(0)) {
        held.delete(msg);
        msg.nak();
      }
      await Promise.all([...inFlight]);
      clearInterval(keepAlive);
    };

    this.#log.info({ consumer: spec.name, filters: spec.filters, slots: spec.slots }, "consumer started");
    return {
      stop: async () => {
        await stop();
        this.#log.info({ consumer: spec.name }, "consumer stopped");
      },
      inFlight: () => inFlight.size,
    };
  }

  /**
   * Creates the durable (several filters in one consumer, NATS 2.10+) or updates its settings. A consumer that
   * replaces the per-filter durables of earlier releases (`<name>_<event>`) starts where the least advanced of
   * them had every message acknowledged, and they are deleted: nothing is lost, and what is redelivered is at
   * most what one of them had not settled — handlers already take deliveries at least once.
   */
  async #ensureConsumer(spec: ConsumerSpec): Promise<void> {
    const stream = this.#options.subjects.stream;
    const durable = spec.name;
    const filters: Partial<ConsumerConfig> =
      spec.filters.length === 0 ? {} : spec.filters.length === 1 ? { filter_subject: spec.filters[0]! } : { filter_subjects: [...spec.filters] };
    const settings: Partial<ConsumerConfig> = {
      ack_policy: AckPolicy.Explicit,
      ack_wait: nanos(spec.ackWaitMs),
      max_deliver: serverMaxDeliver(spec.maxDeliver),
      max_ack_pending: spec.maxAckPending,
      ...filters,
    };
    const legacy = spec.filters.length > 1 ? await this.#existingConsumers(legacyDurableNames(durable, this.#options.subjects.prefix, spec.filters)) : [];
    const exists = (await this.#existingConsumers([durable])).length > 0;
    if (exists) {
      await this.#jsm.consumers.update(stream, durable, settings);
    } else {
      const resumeAt = legacy.length === 0 ? undefined : Math.min(...legacy.map((c) => c.ack_floor.stream_seq + 1));
      const start: Partial<ConsumerConfig> =
        resumeAt === undefined ? { deliver_policy: DeliverPolicy.All } : { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: resumeAt };
      try {
        await this.#jsm.consumers.add(stream, { durable_name: durable, ...start, ...settings });
      } catch (error) {
        // Another replica created it first (perhaps from a later ack floor): take its position, our settings.
        if (!(error instanceof JetStreamApiError) || !(await this.#existingConsumers([durable])).length) throw error;
        await this.#jsm.consumers.update(stream, durable, settings);
      }
    }
    for (const old of legacy) {
      await this.#jsm.consumers.delete(stream, old.name).catch((error: unknown) => {
        // A replica starting alongside deleted it first.
        if (!(error instanceof JetStreamApiError && error.code === JetStreamApiCodes.ConsumerNotFound)) throw error;
      });
      this.#log.info({ consumer: durable, removed: old.name, ack_floor: old.ack_floor.stream_seq }, "per-filter durable replaced by one multi-filter consumer");
    }
  }

  /** Which of `names` exist as consumers on the event stream, with their state. */
  async #existingConsumers(names: readonly string[]): Promise<ConsumerInfo[]> {
    const found: ConsumerInfo[] = [];
    for (const name of names) {
      try {
        found.push(await this.#jsm.consumers.info(this.#options.subjects.stream, name));
      } catch (error) {
        if (!(error instanceof JetStreamApiError && error.code === JetStreamApiCodes.ConsumerNotFound)) throw error;
      }
    }
    return found;
  }

  async #handle(msg: JsMsg, spec: ConsumerSpec, handler: EventHandler, onRejected: RejectionHandler | undefined): Promise<void> {
    const received = this.#stats.tracing ? epochMicros() : 0;
    this.#stats.add(`bus.deliver.${spec.name}`);
    if (msg.info.deliveryCount > 1) this.#stats.add(`bus.redeliver.${spec.name}`);
    const delivery: Delivery = {
      subject: msg.subject,
      streamSeq: msg.seq,
      deliveryCount: msg.info.deliveryCount,
      maxDeliver: spec.maxDeliver,
      working: () => msg.working(),
      signature: signatureFacts(msg.headers, msg.data),
    };
    const parsed = parseEvent(msg.data, this.#options.maxEventBytes);
    if (!parsed.ok) return this.#reject(msg, spec, parsed.rejection, onRejected);
    const mismatch = subjectMismatch(this.#options.subjects, msg.subject, parsed.event);
    if (mismatch) return this.#reject(msg, spec, mismatch, onRejected);
    const event = parsed.event;
    const trust = spec.verifySignatures === false ? undefined : this.#options.trust;
    const problem = trust?.check(event, delivery.signature);
    if (problem) return this.#refuse(msg, spec, event, delivery, problem);
    const step = spec.step && (spec.step.when?.(event) ?? true) ? spec.step : undefined;
    // Without a span of its own, a message's trace context only matters to what its handler publishes.
    const untraced = !step && !this.#options.traceHops && spec.publishes === false;
    if (!this.#options.traceSpans || untraced) {
      this.#settle(msg, spec, event, delivery, received, await this.#outcome(handler, event, delivery, spec));
      return;
    }
    const extracted = propagation.extract(ROOT_CONTEXT, msg.headers, headerGetter);
    const parent = trace.getSpan(extracted) || !this.#options.runTraces ? extracted : this.#options.runTraces.runContext(event.run_id);
    const key = eventStepKey(event);
    const handle = () => this.#outcome(handler, event, delivery, spec);
    let outcome: HandlerOutcome;
    if (this.#options.traceHops) {
      const template = destinationTemplate(msg.subject, event);
      const process = eventAttributes(event);
      writeConsumerAttributes(process, msg.subject, template, spec, event, delivery);
      process["messaging.operation.name"] = "process";
      process["messaging.message.body.size"] = msg.data.byteLength;
      const processSpan = this.#tracer.startSpan(`process ${template}`, { kind: SpanKind.CONSUMER, attributes: process }, parent);
      const inProcess = trace.setSpan(parent, processSpan);
      const inStep = step
        ? () => this.#inSpan(key, inProcess, this.#tracer.startSpan(step.name(event), { attributes: stepSpanAttributes(event, step) }, inProcess), handle)
        : handle;
      outcome = await this.#inSpan(key, parent, processSpan, inStep);
    } else if (step) {
      const template = destinationTemplate(msg.subject, event);
      const attributes = writeConsumerAttributes(stepSpanAttributes(event, step), msg.subject, template, spec, event, delivery);
      outcome = await this.#inSpan(key, parent, this.#tracer.startSpan(step.name(event), { kind: SpanKind.CONSUMER, attributes }, parent), handle);
    } else {
      outcome = await stepContexts.run(key, parent, handle);
    }
    this.#settle(msg, spec, event, delivery, received, outcome);
  }

  /** Runs `run` as `key`'s step in `span` (a child of `parent`); the span ends when `run` settles, marked by an error outcome. */
  async #inSpan(key: string, parent: Context, span: Span, run: () => Promise<HandlerOutcome>): Promise<HandlerOutcome> {
    try {
      const outcome = await stepContexts.run(key, trace.setSpan(parent, span), run);
      if ("error" in outcome) {
        span.recordException(outcome.error as Error);
        span.setStatus({ code: SpanStatusCode.ERROR });
      }
      return outcome;
    } finally {
      span.end();
    }
  }

  /** Runs the handler; a throw is an outcome too ("transient, retry later"). */
  async #outcome(handler: EventHandler, event: ToolgateEvent, delivery: Delivery, spec: ConsumerSpec): Promise<HandlerOutcome> {
    try {
      return { disposition: await handler(event, delivery) };
    } catch (error) {
      this.#log.warn(
        { err: error, consumer: spec.name, ...logIds(event), event_id: event.id, delivery: delivery.deliveryCount },
        "handler failed; will redeliver",
      );
      return { error };
    }
  }

  /** Acknowledges the message as the handler's outcome says. */
  #settle(msg: JsMsg, spec: ConsumerSpec, event: ToolgateEvent, delivery: Delivery, received: number, outcome: HandlerOutcome): void {
    const action = ackAction(outcome, delivery);
    this.#stats.add(`bus.${action.op}.${spec.name}`);
    if (received > 0) this.#stats.record("in", event.id, received, epochMicros());
    if (action.op === "ack") msg.ack();
    else if (action.op === "nak") msg.nak(action.delayMs);
    else {
      this.#log.warn({ consumer: spec.name, ...logIds(event), event_id: event.id, reason: action.reason }, "message terminated");
      // No reason on the wire: servers before 2.10 ignore "+TERM <reason>" and redeliver after the ack wait.
      msg.term();
    }
  }

  /**
   * An event its owner did not sign: no handler sees it. It is reported (an `event_refused` under an id of its
   * own, which no transition uses, so it ends nothing and takes no event id) and acknowledged; a report that
   * cannot be published yet is tried again with the message.
   */
  async #refuse(msg: JsMsg, spec: ConsumerSpec, event: ToolgateEvent, delivery: Delivery, problem: SignatureProblem): Promise<void> {
    const keyId = signatureKeyId(delivery.signature.header);
    this.#stats.add(`bus.refused.${spec.name}`);
    this.#log.warn(
      {
        consumer: spec.name,
        ...logIds(event),
        event_id: event.id,
        type: `${event.kind}.${event.type}`,
        claimed_source: event.source,
        problem,
        key_id: keyId,
        stream_seq: msg.seq,
      },
      "event refused: not signed by its owner",
    );
    const signer = this.#options.signer;
    if (signer && signer.role !== "audit") {
      const report = refusalReport(event, signer.role, problem, keyId, msg.seq, delivery.signature.digest);
      try {
        await this.publish(report);
      } catch (error) {
        this.#log.warn({ err: error, ...logIds(event), event_id: event.id }, "refusal report not published; the refused message comes back");
        msg.nak(1_000);
        return;
      }
    }
    msg.ack();
  }

  async #reject(msg: JsMsg, spec: ConsumerSpec, rejection: EventRejection, onRejected: RejectionHandler | undefined): Promise<void> {
    this.#log.warn({ consumer: spec.name, subject: msg.subject, stream_seq: msg.seq, rejection }, "message rejected");
    try {
      await onRejected?.(rejection, { subject: msg.subject, streamSeq: msg.seq, data: msg.data });
    } catch (error) {
      this.#log.error({ err: error, subject: msg.subject }, "rejection hook failed; redelivering");
      msg.nak(1_000);
      return;
    }
    msg.term();
  }

  watch(filter: string, wanted: (subject: string) => boolean, handler: (event: ToolgateEvent) => void): Subscription {
    const sub = this.#nc.subscribe(filter, {
      callback: (error, msg) => {
        if (error || !wanted(msg.subject)) return;
        const parsed = parseEvent(msg.data, this.#options.maxEventBytes);
        if (!parsed.ok) return;
        const problem = this.#options.trust?.check(parsed.event, signatureFacts(msg.headers, msg.data));
        if (problem) {
          this.#stats.add("bus.refused.watch");
          return;
        }
        handler(parsed.event);
      },
    });
    return { unsubscribe: () => sub.unsubscribe() };
  }

  async close(): Promise<void> {
    if (this.#nc.isClosed()) return;
    await this.#nc.drain();
  }
}

/** The signature header a message came with and the digest of its bytes. */
function signatureFacts(headers: MsgHdrs | undefined, data: Uint8Array): SignatureFacts {
  const header = headers?.has(EVENT_SIGNATURE_HEADER) ? headers.get(EVENT_SIGNATURE_HEADER) : undefined;
  return { header, digest: messageDigest(data).toString("hex") };
}

/** The report of a refused event: in the refused event's chain, under an id only this report uses. */
function refusalReport(
  refused: ToolgateEvent,
  reporter: "orchestrator" | "policy" | "executor",
  reason: SignatureProblem,
  keyId: string | undefined,
  streamSeq: number,
  digest: string,
): ToolgateEvent {
  const chain = refused.kind === "call" ? refused.call_id : refused.run_id;
  const payload = {
    refused_event_id: refused.id,
    refused_type: refused.type,
    claimed_source: refused.source,
    reason,
    ...(keyId ? { key_id: keyId } : {}),
    stream_seq: streamSeq,
    digest,
  };
  const common = {
    v: 1 as const,
    id: refusalEventId(chain, reporter, streamSeq),
    type: "event_refused" as const,
    run_id: refused.run_id,
    seq: refused.seq,
    attempt: 1,
    time: new Date().toISOString(),
    source: reporter,
    principal: refused.principal,
    payload,
  };
  return refused.kind === "call" ? { ...common, kind: "call", call_id: refused.call_id } : { ...common, kind: "run" };
}

/** Throws `refusal` unless it may be overridden and the caller's `allowUnsafe` lets it pass. */
function refuseUnless(options: NatsEventBusOptions, refusal: NatsRefusal | undefined): void {
  if (refusal && !(refusal.overridable && options.allowUnsafe?.(refusal))) throw refusal;
}

/**
 * The per-filter durable names of releases that ran on servers before 2.10 (one filter per consumer):
 * `<name>_<last token>`, e.g. `orchestrator_completed`, and `<name>_call_started` / `<name>_run_started` where
 * last tokens collide. Kept only to find and replace those durables.
 */
function legacyDurableNames(name: string, prefix: string, filters: readonly string[]): string[] {
  const tokensOf = (filter: string): string[] => {
    const tokens = filter.split(".");
    if (tokens[0] === prefix) tokens.shift();
    return tokens.filter((t) => t !== "*" && t !== ">");
  };
  const clean = (suffix: string): string => `${name}_${(suffix || "all").replace(/[^A-Za-z0-9_-]/g, "_")}`;
  const short = filters.map((f) => clean(tokensOf(f).at(-1) ?? ""));
  return [...new Set(filters.map((f, i) => (short.indexOf(short[i]!) === short.lastIndexOf(short[i]!) ? short[i]! : clean(tokensOf(f).join("_")))))];
}

/** The ids a log line about `event` carries (the logger adds the run's `trace_id`). */
function logIds(event: ToolgateEvent): { run_id: string; call_id?: string } {
  return event.kind === "call" ? { run_id: event.run_id, call_id: event.call_id } : { run_id: event.run_id };
}

/** The step key of the call or run an event is about: what a step working on it registers (`stepContexts`). */
function eventStepKey(event: ToolgateEvent): string {
  return event.kind === "call" ? stepKey("call", event.call_id) : stepKey("run", event.run_id);
}

/** A step span's attributes: those of the event that started it (`stepAttributes`), the step's own and its name. */
function stepSpanAttributes(event: ToolgateEvent, step: StepSpan): Attributes {
  const attributes = stepAttributes(event);
  if (step.attributes) Object.assign(attributes, step.attributes);
  attributes["toolgate.step"] = step.step;
  return attributes;
}

/** Writes into `a` the messaging conventions' attributes of a consumer handling `event` from `subject`. */
function writeConsumerAttributes(a: Attributes, subject: string, template: string, spec: ConsumerSpec, event: ToolgateEvent, delivery: Delivery): Attributes {
  a["messaging.system"] = "nats";
  a["messaging.operation.type"] = "process";
  a["messaging.destination.name"] = subject;
  a["messaging.destination.template"] = template;
  a["messaging.consumer.group.name"] = spec.name;
  a["messaging.message.id"] = event.id;
  a["toolgate.delivery_count"] = delivery.deliveryCount;
  return a;
}

/** The subject with its call or run id replaced by a placeholder: a low-cardinality span name (`toolgate.call.{call_id}.proposed`). */
function destinationTemplate(subject: string, event: ToolgateEvent): string {
  const id = event.kind === "call" ? event.call_id : event.run_id;
  return subject.replace(`.${id}.`, event.kind === "call" ? ".{call_id}." : ".{run_id}.");
}

/**
 * A W3C traceparent for `event` without a span to take it from: the trace is its run (trace id derived from
 * the run id), the span its event (span id derived from the event id), not sampled.
 */
function runTraceParent(event: ToolgateEvent): string {
  return `00-${runTraceId(event.run_id)}-${spanIdOf(event.id)}-00`;
}

function subjectMismatch(subjects: SubjectCatalogue, subject: string, event: ToolgateEvent): EventRejection | undefined {
  const parts = subjects.parse(subject);
  const id = event.kind === "call" ? event.call_id : event.run_id;
  if (parts && parts.kind === event.kind && parts.id === id && parts.type === event.type) return undefined;
  return { reason: "subject_mismatch", detail: `event ${event.kind}.${event.type} for ${id} arrived on ${subject}` };
}

/**
 * Keeps the ack wait of messages a live process holds from running out: every third of the ack wait, each
 * message held for longer than that is reported in progress (`+WPI`), so the wait can be short — a dead
 * process's messages go to another replica within one ack wait — without redelivering the slow handlers and
 * the messages queued behind them of a live one. One timer per consumer; messages handled faster than a
 * third of the ack wait never cost a heartbeat.
 */
function heldMessagesKeepAlive(held: Map<JsMsg, number>, ackWaitMs: number): NodeJS.Timeout {
  const every = Math.max(100, Math.floor(ackWaitMs / 3));
  const timer = setInterval(() => {
    const now = Date.now();
    for (const [msg, heardAt] of held) {
      if (now - heardAt < every) continue;
      msg.working();
      held.set(msg, now);
    }
  }, every);
  timer.unref();
  return timer;
}
