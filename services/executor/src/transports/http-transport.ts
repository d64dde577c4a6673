import { ErrorCodeSchema, isRetryableByDefault, sha256, type ErrorCode, type JsonValue } from "@toolgate/contracts";
import { writes, type ToolContext, type ToolContract } from "@toolgate/registry";
import { Agent, request } from "undici";
import { requestIdOf, type ToolAnswer } from "../run-tool.js";

/** Connection errors raised before a request could reach the far side: nothing can have happened there. */
const NOT_SENT = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH", "UND_ERR_CONNECT_TIMEOUT"]);
const PREVIEW_BYTES = 512;

export interface HttpTransportOptions {
  /** Allow-list: origin named by a contract → origin the request goes to. */
  endpoints: Readonly<Record<string, string>>;
  /** Connections per origin. */
  connections: number;
}

/** A typed error a far side may answer with: `{ "error": { "code", "message", "retryable"? } }`. */
interface TypedError {
  code: ErrorCode;
  message: string;
  retryable?: boolean;
}

/**
 * Runs tools behind HTTP with undici. The request is `{ arguments, call_id, run_id, principal, context }` as
 * JSON with the runtime's `Idempotency-Key`, so the far side can deduplicate too. The answer is the tool's data
 * (2xx), `{ operation_id }` (202, long-running) or a typed error; status codes map to error codes, and bodies
 * that are not a typed error never reach the model (they are kept as evidence). Bodies are read up to the
 * contract's result limit, never further.
 */
export class HttpTransport {
  readonly #endpoints: ReadonlyMap<string, string>;
  readonly #agent: Agent;

  constructor(options: HttpTransportOptions) {
    this.#endpoints = new Map(Object.entries(options.endpoints).map(([from, to]) => [new URL(from).origin, new URL(to).origin]));
    this.#agent = new Agent({ connections: options.connections, pipelining: 1 });
  }

  /** Why the contract's endpoint may not be called (not on the allow-list), or undefined when it may. */
  refusal(contract: ToolContract): string | undefined {
    if (contract.transport.kind !== "http") return "not an HTTP tool";
    const origin = new URL(contract.transport.url).origin;
    return this.#endpoints.has(origin) ? undefined : `${origin} is not an allowed HTTP tool origin`;
  }

  /** Calls the tool once. Throws only when `ctx.signal` aborts (the executor has already timed the call out). */
  async call(contract: ToolContract, args: Record<string, JsonValue>, ctx: ToolContext): Promise<ToolAnswer> {
    if (contract.transport.kind !== "http") throw new TypeError(`${contract.name} is not an HTTP tool`);
    const target = new URL(contract.transport.url);
    const origin = this.#endpoints.get(target.origin);
    if (origin === undefined) return { outcome: { ok: false, code: "TOOL_DISABLED", message: `${contract.name} is not reachable from this executor` } };
    const url = new URL(`${target.pathname}${target.search}`, origin);
    const sideEffect = writes(contract);
    let response: Awaited<ReturnType<typeof request>>;
    try {
      response = await request(url, {
        dispatcher: this.#agent,
        method: contract.transport.method,
        signal: ctx.signal,
        headers: {
          "content-type": "application/json",
          accept: "application/json",
          "idempotency-key": ctx.idempotencyKey,
          "x-toolgate-call-id": ctx.callId,
          "x-toolgate-run-id": ctx.runId,
        },
        body: JSON.stringify({
          arguments: args,
          call_id: ctx.callId,
          run_id: ctx.runId,
          principal: { tenant: ctx.principal.tenant, subject: ctx.principal.subject, roles: ctx.principal.roles },
          context: ctx.context,
        }),
      });
    } catch (error) {
      if (ctx.signal.aborted) throw error;
      return transportFailure(contract, error, sideEffect);
    }
    let body: { text: string } | { tooLarge: true };
    try {
      body = await readBounded(response.body, contract.limits.max_result_bytes);
    } catch (error) {
      if (ctx.signal.aborted) throw error;
      // The far side answered (so it did act) but the body broke off: its outcome is unknown.
      return transportFailure(contract, error, sideEffect, response.statusCode);
    }
    const answer = interpret(contract, response.statusCode, response.headers, body);
    const requestId = requestIdOf(response.headers["x-request-id"]) ?? requestIdOf(response.headers["request-id"]);
    const rawHash = "text" in body ? sha256(body.text) : undefined;
    return { ...answer, downstream: { transport: "http", ...(requestId ? { request_id: requestId } : {}), ...(rawHash ? { raw_output_hash: rawHash } : {}) } };
  }

  async close(): Promise<void> {
    await this.#agent.close();
  }
}

async function readBounded(body: AsyncIterable<Buffer> & { destroy(): unknown }, limit: number): Promise<{ text: string } | { tooLarge: true }> {
  const chunks: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of body) {
    bytes += chunk.length;
    if (bytes > limit) {
      body.destroy();
      return { tooLarge: true };
    }
    chunks.push(chunk);
  }
  return { text: Buffer.concat(chunks).toString("utf8") };
}

function errorCodeOf(error: unknown): string | undefined {
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 4; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string") return code;
  }
  return undefined;
}

function transportFailure(contract: ToolContract, error: unknown, sideEffect: boolean, status?: number): ToolAnswer {
  const code = errorCodeOf(error);
  const evidence = { transport: "http", error: code ?? (error instanceof Error ? error.name : "unknown"), ...(status === undefined ? {} : { status }) };
  if ((code !== undefined && NOT_SENT.has(code)) || !sideEffect) {
    return { outcome: { ok: false, code: "UPSTREAM_UNAVAILABLE", message: `${contract.name} could not be reached`, retryable: true }, evidence };
  }
  return {
    outcome: { ok: false, code: "OUTCOME_UNKNOWN", message: `the connection to ${contract.name} broke after the request was sent` },
    evidence,
  };
}

/** Retry-After as milliseconds: delta-seconds or an HTTP date. */
export function retryAfterMs(header: string | string[] | undefined, now = Date.now()): number | undefined {
  const value = Array.isArray(header) ? header[0] : header;
  if (value === undefined || value.trim() === "") return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1_000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

function typedError(value: unknown): TypedError | undefined {
  if (typeof value !== "object" || value === null || !("error" in value)) return undefined;
  const error = value.error;
  if (typeof error !== "object" || error === null) return undefined;
  const { code, message, retryable } = error as Record<string, unknown>;
  const parsed = ErrorCodeSchema.safeParse(code);
  if (!parsed.success || typeof message !== "string") return undefined;
  return { code: parsed.data, message: message.slice(0, 512), ...(typeof retryable === "boolean" ? { retryable } : {}) };
}

const STATUS_CODES: Record<number, ErrorCode> = {
  401: "PERMISSION_DENIED",
  403: "PERMISSION_DENIED",
  404: "OBJECT_NOT_FOUND",
  408: "UPSTREAM_UNAVAILABLE",
  409: "STATE_CONFLICT",
  429: "RATE_LIMITED",
  502: "UPSTREAM_UNAVAILABLE",
  503: "UPSTREAM_UNAVAILABLE",
  504: "UPSTREAM_UNAVAILABLE",
};

function interpret(
  contract: ToolContract,
  status: number,
  headers: Record<string, string | string[] | undefined>,
  body: { text: string } | { tooLarge: true },
): ToolAnswer {
  if ("tooLarge" in body) {
    return {
      outcome: { ok: false, code: "RESULT_TOO_LARGE", message: `the result is larger than the ${contract.limits.max_result_bytes}-byte limit` },
      evidence: { transport: "http", status },
    };
  }
  let json: unknown;
  try {
    json = body.text === "" ? undefined : JSON.parse(body.text);
  } catch {
    json = undefined;
  }
  const preview = { transport: "http", status, body: body.text.slice(0, PREVIEW_BYTES) };
  if (status >= 200 && status < 300) {
    if (status === 202) {
      const operationId = (json as { operation_id?: unknown } | undefined)?.operation_id;
      if (typeof operationId === "string" && operationId.length > 0 && operationId.length <= 128)
        return { outcome: { ok: "accepted", operation_id: operationId } };
      return { outcome: { ok: false, code: "INVALID_TOOL_RESULT", message: `${contract.name} accepted the call without an operation id` }, evidence: preview };
    }
    if (json === undefined)
      return { outcome: { ok: false, code: "INVALID_TOOL_RESULT", message: `${contract.name} answered with no JSON` }, evidence: preview };
    return { outcome: { ok: true, data: json as JsonValue } };
  }
  const retryAfter = retryAfterMs(headers["retry-after"]);
  const details = retryAfter === undefined ? undefined : { retry_after_ms: retryAfter };
  const typed = typedError(json);
  if (typed) {
    return {
      outcome: {
        ok: false,
        code: typed.code,
        message: typed.message,
        retryable: typed.retryable ?? isRetryableByDefault(typed.code),
        ...(details ? { details } : {}),
      },
    };
  }
  const code = STATUS_CODES[status];
  if (code === undefined) {
    // A failure the far side did not type (a 500 with a stack trace, say): the model only learns that it failed.
    return { outcome: { ok: false, code: "EXECUTION_ERROR", message: `${contract.name} failed (HTTP ${status})` }, evidence: preview };
  }
  return {
    outcome: { ok: false, code, message: `${contract.name} answered HTTP ${status}`, retryable: isRetryableByDefault(code), ...(details ? { details } : {}) },
    evidence: preview,
  };
}
