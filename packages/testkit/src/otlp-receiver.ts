import { createServer, type Server } from "node:http";

/** An attribute value as OTLP/JSON carries it, flattened (arrays and maps as their JSON text). */
export type SpanAttributeValue = string | number | boolean;

/** One span a service exported, as the receiver decoded it. */
export interface ReceivedSpan {
  /** The resource's `service.name`. */
  service: string;
  resource: Record<string, SpanAttributeValue>;
  traceId: string;
  spanId: string;
  /** Empty for a root span. */
  parentSpanId: string;
  name: string;
  /** OTLP's span kind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  startNs: bigint;
  endNs: bigint;
  attributes: Record<string, SpanAttributeValue>;
  events: { name: string; attributes: Record<string, SpanAttributeValue> }[];
}

interface OtlpValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: string | number;
  doubleValue?: number;
  arrayValue?: unknown;
  kvlistValue?: unknown;
  bytesValue?: string;
}
type OtlpAttributes = { key: string; value: OtlpValue }[] | undefined;
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind?: number;
  startTimeUnixNano: string | number;
  endTimeUnixNano: string | number;
  attributes?: OtlpAttributes;
  events?: { name: string; attributes?: OtlpAttributes }[];
}
interface ExportTraceServiceRequest {
  resourceSpans?: { resource?: { attributes?: OtlpAttributes }; scopeSpans?: { spans?: OtlpSpan[] }[] }[];
}

function valueOf(v: OtlpValue): SpanAttributeValue {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  return JSON.stringify(v.arrayValue ?? v.kvlistValue ?? v.bytesValue ?? null);
}

function attributesOf(list: OtlpAttributes): Record<string, SpanAttributeValue> {
  return Object.fromEntries((list ?? []).map(({ key, value }) => [key, valueOf(value)]));
}

/**
 * A small OTLP/HTTP trace receiver on loopback for tests: decodes the JSON encoding (`OTEL_EXPORTER_OTLP_PROTOCOL=
 * http/json`) of each `POST /v1/traces` and keeps every span; answers 415 to any other encoding, so a test that
 * forgot the protocol fails loudly instead of seeing no spans.
 */
export class OtlpReceiver {
  readonly #server: Server;
  readonly #spans: ReceivedSpan[] = [];
  /** Requests refused (another encoding, bad JSON): a test expects none. */
  readonly refused: string[] = [];

  private constructor(server: Server) {
    this.#server = server;
  }

  /** Listens on a free loopback port. */
  static async start(): Promise<OtlpReceiver> {
    let receiver: OtlpReceiver | undefined = undefined;
    const server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on("data", (chunk: Buffer) => chunks.push(chunk));
      request.on("end", () => {
        const type = request.headers["content-type"] ?? "";
        if (request.method !== "POST" || request.url !== "/v1/traces" || !type.startsWith("application/json")) {
          receiver!.refused.push(`${request.method} ${request.url} ${type}`);
          response.writeHead(415).end();
          return;
        }
        try {
          receiver!.#take(JSON.parse(Buffer.concat(chunks).toString("utf8")) as ExportTraceServiceRequest);
        } catch (error) {
          receiver!.refused.push(`undecodable: ${(error as Error).message}`);
          response.writeHead(400).end();
          return;
        }
        response.writeHead(200, { "content-type": "application/json" }).end("{}");
      });
    });
    receiver = new OtlpReceiver(server);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return receiver;
  }

  /** The base URL to give as `OTEL_EXPORTER_OTLP_ENDPOINT`. */
  get endpoint(): string {
    const address = this.#server.address();
    return `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`;
  }

  /** Every span received so far, in arrival order. */
  spans(): readonly ReceivedSpan[] {
    return this.#spans;
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #take(body: ExportTraceServiceRequest): void {
    for (const rs of body.resourceSpans ?? []) {
      const resource = attributesOf(rs.resource?.attributes);
      for (const ss of rs.scopeSpans ?? []) {
        for (const s of ss.spans ?? []) {
          this.#spans.push({
            service: String(resource["service.name"] ?? ""),
            resource,
            traceId: s.traceId,
            spanId: s.spanId,
            parentSpanId: s.parentSpanId ?? "",
            name: s.name,
            kind: s.kind ?? 0,
            startNs: BigInt(s.startTimeUnixNano),
            endNs: BigInt(s.endTimeUnixNano),
            attributes: attributesOf(s.attributes),
            events: (s.events ?? []).map((e) => ({ name: e.name, attributes: attributesOf(e.attributes) })),
          });
        }
      }
    }
  }
}
