import { DeliverPolicy, jetstream, JetStreamApiCodes, JetStreamApiError } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { seedAuthenticator } from "@toolgate/bus";
import { parseEvent, subjectCatalogue, type ToolgateEvent } from "@toolgate/contracts";
import { CliError } from "./cli-error.js";

/** Where `tail` reads from and what it prints. */
export interface TailOptions {
  servers: string;
  seed: string | undefined;
  /** A PEM file of the NATS servers' CA (`NATS_TLS_CA`): the connection requires TLS verified against it. */
  tlsCa: string | undefined;
  prefix: string;
  run: string | undefined;
  call: string | undefined;
  print: (event: ToolgateEvent) => void;
}

const MAX_EVENT_BYTES = 8 * 1024 * 1024;

/** One line per event, for `tail` and `audit`. */
export function describeEvent(event: ToolgateEvent): string {
  const who = event.kind === "call" ? event.call_id : event.run_id;
  const tool = event.tool?.name ?? (event.kind === "call" && event.type === "proposed" ? event.payload.tool_name : "");
  let detail = "";
  if (event.kind === "call" && (event.type === "completed" || event.type === "rejected" || event.type === "denied" || event.type === "outcome_unknown")) {
    const r = event.payload.result;
    detail = r.ok ? "ok" : `${r.error.code} retryable=${r.retryable}`;
  }
  if (event.kind === "call" && event.type === "approval_requested") detail = `${event.payload.approval_id} expires ${event.payload.expires_at}`;
  if (event.kind === "call" && event.type === "approval_granted") detail = `${event.payload.approval_id} by ${event.payload.approver.subject}`;
  if (event.kind === "run" && event.type === "stopped") detail = event.payload.reason;
  return `${event.time}  ${`${event.kind}.${event.type}`.padEnd(22)} ${who}  ${tool} ${detail}`.trimEnd();
}

/**
 * Prints events until SIGINT or SIGTERM. With a call, its whole history first, from the event stream (so a
 * call that has ended still shows what happened to it), then what follows; otherwise live events only.
 * Throws {@link CliError} when NATS or the stream cannot be reached.
 */
export async function tail(options: TailOptions): Promise<void> {
  const subjects = subjectCatalogue(options.prefix);
  const nc = await connect({
    servers: options.servers.split(","),
    timeout: 5_000,
    ...(options.seed ? { authenticator: seedAuthenticator(options.seed) } : {}),
    ...(options.tlsCa ? { tls: { caFile: options.tlsCa } } : {}),
  }).catch((error: unknown) => {
    throw new CliError(`cannot reach NATS at ${options.servers} (NATS_URL): ${(error as Error).message}`);
  });
  const stop = () => void nc.drain().then(() => process.exit(0));
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
  const messages = options.call ? await callHistory(nc, subjects.stream, subjects.oneCall(options.call)) : nc.subscribe(`${subjects.prefix}.>`);
  const filter = options.call ? subjects.oneCall(options.call) : `${subjects.prefix}.>`;
  console.error(`following ${filter}${options.call ? " from its first event" : ""}${options.run ? ` for run ${options.run}` : ""} (Ctrl-C to stop)`);
  for await (const msg of messages) {
    const parsed = parseEvent(msg.data, MAX_EVENT_BYTES);
    if (!parsed.ok) {
      console.log(`(${msg.subject}: ${parsed.rejection.reason})`);
      continue;
    }
    if (options.run && parsed.event.run_id !== options.run) continue;
    options.print(parsed.event);
  }
}

/** Every event of one call in the stream, oldest first, then those still to come (an ordered consumer: no gaps, no repeats). */
async function callHistory(nc: NatsConnection, stream: string, filter: string) {
  try {
    const consumer = await jetstream(nc, { timeout: 5_000 }).consumers.get(stream, { filter_subjects: [filter], deliver_policy: DeliverPolicy.All });
    return await consumer.consume();
  } catch (error) {
    if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound)
      throw new CliError(`NATS has no stream ${stream}; check TOOLGATE_SUBJECT_PREFIX`, { cause: error });
    throw new CliError(`cannot read the stream ${stream}: ${(error as Error).message}`, { cause: error });
  }
}
