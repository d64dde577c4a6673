import type { EventRejection, SignatureFacts, ToolgateEvent } from "@toolgate/contracts";
import type { Disposition } from "./disposition.js";

/** What JetStream said about one publish. */
export interface PublishReceipt {
  /** Stream sequence of the stored message (of the original when `duplicate`). */
  seq: number;
  /** True when the stream's duplicate window dropped this publish because its event id was seen before. */
  duplicate: boolean;
}

/** Facts about one delivery of a message, for handlers that behave differently on the last attempt. */
export interface Delivery {
  subject: string;
  streamSeq: number;
  /** 1 on the first delivery. */
  deliveryCount: number;
  maxDeliver: number;
  /** Tells the server the handler is still working, resetting the ack wait. */
  working(): void;
  /**
   * The signature the message came with and the digest of its bytes: checked by the bus before the handler ran
   * (unless the consumer records events to verify them later, as audit does).
   */
  signature: SignatureFacts;
}

/**
 * Handles one valid event; returns what to do with the message. Throwing means "transient, retry later" —
 * unless the error says the event's data cannot be processed at all (a value the store refuses): then never again.
 */
export type EventHandler = (event: ToolgateEvent, delivery: Delivery) => Promise<Disposition>;

/** Called for a message that is not a valid event; the message is then terminated, never redelivered. */
export type RejectionHandler = (rejection: EventRejection, message: { subject: string; streamSeq: number; data: Uint8Array }) => Promise<void>;

/** A durable consumer shared by every replica of a service. */
export interface ConsumerSpec {
  /** Durable consumer name (one per filter on servers without multi-filter support). */
  name: string;
  /** Subject filters; empty means every event in the stream. */
  filters: readonly string[];
  /** Handlers running at once in this process (the pipeline depth). */
  slots: number;
  /** Messages the server lets this consumer have unacknowledged across all replicas (back-pressure). */
  maxAckPending: number;
  ackWaitMs: number;
  /**
   * Deliveries a message gets whose handler keeps throwing (not counting failures that say a dependency was
   * unreachable: those retry every second for as long as the outage lasts); -1 for unbounded.
   */
  maxDeliver: number;
  /**
   * Whether the bus checks each event's signature before the handler sees it (default true when the bus has a
   * trust list): an event not signed by a key of its owner's role is refused, reported and acknowledged. False
   * only for a consumer that acts on nothing and keeps the signature to verify later (audit).
   */
  verifySignatures?: boolean;
  /**
   * Whether the handler publishes events (default true). With spans on, a message its step gives no span of its
   * own is still handled in its publisher's trace context, so that what the handler publishes continues that
   * trace; a consumer that publishes nothing (audit) says false and skips that work for such messages.
   */
  publishes?: boolean;
  /**
   * The named step of a call its handler is (`policy_decision`, `execute_tool <tool>`, `attach_result`). With
   * spans on, each message it handles (of those `when` accepts) is handled in a span of that name carrying the
   * event's attributes: the consumer span itself, or the process span's child when every hop has its own spans.
   * A consumer without a step (or a message `when` refuses) gets no span of its own unless hops are traced: what
   * its handler publishes continues the publisher's span.
   */
  step?: StepSpan;
}

/** A consumer's step: its kind (`toolgate.step`), its span's name per event, and which events get one. */
export interface StepSpan {
  step: string;
  name: (event: ToolgateEvent) => string;
  when?: (event: ToolgateEvent) => boolean;
  /** Attributes the span carries besides the event's (e.g. `gen_ai.operation.name`). */
  attributes?: Readonly<Record<string, string>>;
}

/** A running consumer. */
export interface Worker {
  /** Stops pulling, lets in-flight handlers finish and acknowledge, then resolves. */
  stop(): Promise<void>;
  /** Messages currently being handled. */
  inFlight(): number;
}

/** The event bus port: publish state transitions, consume them through durable consumers. */
export interface EventBus {
  /** Publishes one event and waits for the stream's acknowledgement. Throws `PublishError` (retryable). */
  publish(event: ToolgateEvent): Promise<PublishReceipt>;
  /**
   * The stored event of `type` for call (or run) `id` — the latest one when it was published more than once —
   * read back from the stream, parsed and validated; undefined when the stream holds none (or only an invalid
   * message) under that subject. For recovering what a crashed process had not written down yet: JetStream is
   * the log. Throws when the stream cannot be read (retryable).
   */
  lastEvent(kind: "call" | "run", id: string, type: string): Promise<ToolgateEvent | undefined>;
  /**
   * Every stored event under `filters` (subject filters that do not overlap, e.g. one call's and one run's),
   * oldest first, at most `limit`: read once through a short-lived consumer, each event checked like
   * {@link lastEvent} (an invalid message, or one not signed by its owner, is left out). `truncated` when the
   * stream holds more. For views of what happened (a run's timeline); throws when the stream cannot be read.
   */
  history(filters: readonly string[], limit: number): Promise<{ events: ToolgateEvent[]; truncated: boolean }>;
  /** Starts a pipelined worker on a durable consumer (created or updated idempotently). */
  consume(spec: ConsumerSpec, handler: EventHandler, onRejected?: RejectionHandler): Promise<Worker>;
  /**
   * Watches events live without a durable consumer (at most once, nothing replayed): for notifications
   * that have a durable fallback. `wanted` sees the subject first, so uninteresting messages are not parsed.
   */
  watch(filter: string, wanted: (subject: string) => boolean, handler: (event: ToolgateEvent) => void): Subscription;
  /**
   * How far behind each durable consumer this process works on is: read from the server (one JetStream API
   * request per consumer), for the metrics a scrape asks for. Throws when the server cannot be asked.
   */
  consumerLag(): Promise<ConsumerLag[]>;
  /** Stops nothing by itself: stop workers first, then close drains the connection. */
  close(): Promise<void>;
}

/** A durable consumer's backlog, as the server counts it. */
export interface ConsumerLag {
  consumer: string;
  /** Messages under the consumer's filters not yet delivered. */
  pending: number;
  /** Delivered and not yet acknowledged. */
  ackPending: number;
  /** Of those, delivered more than once. */
  redelivered: number;
}

/** A live watch; `unsubscribe` ends it. */
export interface Subscription {
  unsubscribe(): void;
}
