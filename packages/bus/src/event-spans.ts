import type { Attributes } from "@opentelemetry/api";
import type { ToolgateEvent } from "@toolgate/contracts";

/**
 * What a span may say about an event (seed 001 §7.1): its ids, tool and contract version, attempt, outcome
 * (status, error code, duration), approval id, idempotency-key digest, tokens — read from a fixed list of
 * envelope and payload fields, never an argument, a result's data, a message text or a principal. Names follow
 * the OpenTelemetry generative-AI conventions where they have one (`gen_ai.tool.name`, `gen_ai.tool.call.id`).
 */
export function eventAttributes(event: ToolgateEvent): Attributes {
  return writeFacts(writeIds({ "toolgate.event.type": `${event.kind}.${event.type}` }, event), event);
}

/**
 * What a step takes from an event it handles or publishes: the event's attributes but its type, so a step's span
 * ends up with the tool, attempt, key digest and outcome of what it published.
 */
export function stepAttributes(event: ToolgateEvent): Attributes {
  return writeFacts(writeIds({}, event), event);
}

/** What a span event recording `event` says: what happened (attempt, outcome…); its span already names the call. */
export function eventFacts(event: ToolgateEvent): Attributes {
  return writeFacts({}, event);
}

/** Writes into `a` the ids every event of a call shares: run, call, tool and contract version, provider id, key digest. */
function writeIds(a: Attributes, event: ToolgateEvent): Attributes {
  a["toolgate.run_id"] = event.run_id;
  if (event.kind === "call") a["toolgate.call_id"] = event.call_id;
  if (event.tool) {
    a["gen_ai.tool.name"] = event.tool.name;
    a["toolgate.schema_version"] = event.tool.version;
  }
  const p = event.payload as Record<string, unknown>;
  if (!event.tool && typeof p.tool_name === "string") a["gen_ai.tool.name"] = p.tool_name.slice(0, 128);
  if (typeof p.provider_call_id === "string") a["gen_ai.tool.call.id"] = p.provider_call_id;
  if (typeof p.idempotency_key_hash === "string") a["toolgate.idempotency_key_hash"] = p.idempotency_key_hash;
  return a;
}

/** Writes into `a` what this event says happened: attempt, approval, duration, turn, tokens, outcome. */
function writeFacts(a: Attributes, event: ToolgateEvent): Attributes {
  a["toolgate.attempt"] = event.attempt;
  const p = event.payload as Record<string, unknown>;
  if (typeof p.approval_id === "string") a["toolgate.approval_id"] = p.approval_id;
  if (typeof p.duration_ms === "number") a["toolgate.duration_ms"] = p.duration_ms;
  if (typeof p.turn === "number") a["toolgate.turn"] = p.turn;
  if (typeof p.tokens === "number") a["toolgate.tokens"] = p.tokens;
  if (typeof p.model_version === "string") a["gen_ai.response.model"] = p.model_version;
  if (typeof p.reason === "string" && event.kind === "run") a["toolgate.stop_reason"] = p.reason;
  if (typeof p.code === "string") a["toolgate.error_code"] = p.code;
  if (typeof p.delay_ms === "number") a["toolgate.retry.delay_ms"] = p.delay_ms;
  if (typeof p.ok === "boolean") a["toolgate.status"] = p.ok ? "ok" : "error";
  const result = p.result as { ok?: unknown; error?: { code?: unknown }; retryable?: unknown } | undefined;
  if (typeof result === "object" && result !== null && typeof result.ok === "boolean") {
    // The outcome of a result envelope: status, error code (also as `error.type`), retryable.
    a["toolgate.status"] = result.ok === true ? "ok" : "error";
    const code = result.ok === false && typeof result.error?.code === "string" ? result.error.code : undefined;
    if (code) {
      a["toolgate.error_code"] = code;
      a["error.type"] = code;
    }
    if (typeof result.retryable === "boolean") a["toolgate.retryable"] = result.retryable;
  }
  return a;
}
