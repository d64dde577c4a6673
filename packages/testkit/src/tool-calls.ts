import { randomUUID } from "node:crypto";
import type { AuditedEvent, Stack, STACK_USERS } from "./stack.js";
import { waitFor } from "./wait-for.js";

/** A terminal result as the orchestrator's API returns it (loosely typed: tests assert on it). */
export type CallResult = Record<string, unknown> & {
  ok: boolean;
  data?: unknown;
  error?: { code: string; message: string; details?: Record<string, unknown> };
  retryable?: boolean;
  operation_id?: string;
  evidence_ref?: string;
  replayed?: boolean;
  truncated?: boolean;
};

/** Who calls (an API key user of the stack, or any bearer credential such as a JWT), how long to wait, in which run. */
export interface CallOptions {
  waitMs?: number;
  user?: keyof typeof STACK_USERS;
  credential?: string;
  runId?: string;
}

/** One call submitted through `POST /v1/tool-calls`: its runtime ids and, when it finished in time, its result. */
export interface SubmittedCall {
  runId: string;
  callId: string;
  result?: CallResult;
}

/**
 * Submits one tool call as a host running its own loop (each submission is its own run unless `runId` is
 * given) and waits up to `waitMs` for its result. Throws when the orchestrator refuses the submission.
 */
export async function callTool(stack: Stack, name: string, args: Record<string, unknown>, options: CallOptions = {}): Promise<SubmittedCall> {
  const [call] = await callTools(stack, [{ name, arguments: args }], options);
  return call!;
}

/** Submits several tool calls in one response (one turn of one run); see {@link callTool}. */
export async function callTools(
  stack: Stack,
  calls: { name: string; arguments: Record<string, unknown> }[],
  options: CallOptions = {},
): Promise<SubmittedCall[]> {
  const body = {
    ...(options.runId ? { run_id: options.runId } : {}),
    // A host's call id names one call in its run: calls added to an existing run get ids of their own.
    calls: calls.map((c, i) => ({ id: options.runId ? `host_${randomUUID()}` : `host_${i + 1}`, name: c.name, arguments: c.arguments })),
    wait_ms: options.waitMs ?? 30_000,
  };
  type Answer = { run_id: string; results: { call_id: string; status: string; result?: CallResult }[] };
  const response = options.credential
    ? await stack.apiWith<Answer>(options.credential, "POST", "/v1/tool-calls", body)
    : await stack.api<Answer>("POST", "/v1/tool-calls", body, options.user ?? "alice");
  if (response.status !== 200 && response.status !== 202) throw new Error(`tool calls refused (${response.status}): ${JSON.stringify(response.body)}`);
  return response.body.results.map((r) => ({ runId: response.body.run_id, callId: r.call_id, ...(r.result ? { result: r.result } : {}) }));
}

/** The result the orchestrator attached to a call, once it has one. */
export async function resultOf(stack: Stack, callId: string, options: { timeoutMs?: number; user?: keyof typeof STACK_USERS } = {}): Promise<CallResult> {
  return waitFor(
    async () => {
      const { status, body } = await stack.api<{ status: string; result?: CallResult }>("GET", `/v1/tool-calls/${callId}`, undefined, options.user ?? "alice");
      return status === 200 && body.result ? body.result : undefined;
    },
    { timeoutMs: options.timeoutMs ?? 30_000, intervalMs: 100, description: `the result of ${callId}` },
  );
}

/** A call's events as audit stored them, in order. */
export async function callEvents(stack: Stack, callId: string): Promise<AuditedEvent["event"][]> {
  const { body } = await stack.audit<{ events?: AuditedEvent[] }>(`/v1/calls/${callId}/events`);
  return (body.events ?? []).map((e) => e.event);
}

/** Waits until audit holds events of the call that satisfy `done`; returns them all. */
export async function waitForCallEvents(
  stack: Stack,
  callId: string,
  done: (events: AuditedEvent["event"][]) => boolean,
  options: { timeoutMs?: number; description?: string } = {},
): Promise<AuditedEvent["event"][]> {
  return waitFor(
    async () => {
      const events = await callEvents(stack, callId);
      return done(events) ? events : undefined;
    },
    { timeoutMs: options.timeoutMs ?? 30_000, intervalMs: 100, description: options.description ?? `events of ${callId}` },
  );
}

/**
 * A call's whole trail, once audit holds its last event (`result_attached`). A result read from the orchestrator
 * does not mean audit has stored every event yet: audit consumes the stream on its own.
 */
export async function settledCallEvents(stack: Stack, callId: string, options: { timeoutMs?: number } = {}): Promise<AuditedEvent["event"][]> {
  return waitForCallEvents(stack, callId, (events) => events.some((e) => e.type === "result_attached"), {
    ...options,
    description: `audit holding the whole trail of ${callId}`,
  });
}

/** The types of a call's events with their attempt, e.g. `started:1`, in audit order. */
export function eventTrail(events: readonly AuditedEvent["event"][]): string[] {
  return events.map((e) => `${e.type}:${(e as { attempt?: number }).attempt ?? 1}`);
}
