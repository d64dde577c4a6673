import { MAX_ARGUMENTS_JSON_BYTES, newCallId, type CallEventOf } from "@toolgate/contracts";
import type { ProposedToolCall } from "@toolgate/models";
import type { ToolRegistry } from "@toolgate/registry";
import { callTraits } from "./call-scheduler.js";
import type { CallRecord, CallResultRecord, RunRecord } from "./run-store.js";

/** A request the run loop refuses; the API maps it to a 4xx with this code. */
export class RunRequestError extends Error {
  constructor(
    readonly code: "UNKNOWN_MODEL" | "RUN_NOT_FOUND" | "RUN_NOT_EXTERNAL" | "RUN_IS_EXTERNAL" | "INVALID_CALLS",
    message: string,
  ) {
    super(message);
    this.name = "RunRequestError";
  }
}

/** Tool calls of one response: ids present and unique, names and arguments bounded. Throws RunRequestError. */
export function validateCalls(calls: readonly ProposedToolCall[]): void {
  if (calls.length === 0 || calls.length > 64) throw new RunRequestError("INVALID_CALLS", "a response carries 1 to 64 tool calls");
  const ids = new Set<string>();
  for (const c of calls) {
    if (typeof c.id !== "string" || c.id.length === 0 || c.id.length > 256)
      throw new RunRequestError("INVALID_CALLS", "every tool call needs an id of at most 256 characters");
    if (ids.has(c.id)) throw new RunRequestError("INVALID_CALLS", `duplicate tool call id ${JSON.stringify(c.id.slice(0, 64))}`);
    ids.add(c.id);
    if (typeof c.name !== "string" || c.name.length > 256) throw new RunRequestError("INVALID_CALLS", "tool names are strings of at most 256 characters");
    if (typeof c.arguments !== "string" || Buffer.byteLength(c.arguments) > MAX_ARGUMENTS_JSON_BYTES) {
      throw new RunRequestError("INVALID_CALLS", `arguments are a JSON text of at most ${MAX_ARGUMENTS_JSON_BYTES} bytes`);
    }
  }
}

/** The records of one response's calls, each with a new runtime call id and the traits the scheduler needs. */
export function callRecords(
  registry: ToolRegistry,
  run: RunRecord,
  turn: number,
  calls: readonly ProposedToolCall[],
  taint: CallRecord["taint"],
  now: Date,
): CallRecord[] {
  return calls.map((c, order) => ({
    _id: newCallId(),
    run_id: run._id,
    turn,
    provider_call_id: c.id,
    tool_name: c.name,
    arguments_json: c.arguments,
    order,
    ...callTraits(registry, c.name, c.arguments),
    taint,
    created_at: now,
  }));
}

/**
 * A call's record as its proposal in the stream holds it: for a call whose record was to be written with its
 * outcome by a process that did not get to do it. Its scheduling traits are those it was proposed with (a proposal
 * of an earlier release, without them: those of the contract in force now).
 */
export function callFromProposal(registry: ToolRegistry, event: CallEventOf<"proposed">): CallRecord {
  const { provider_call_id, tool_name, arguments_json, turn, order, taint, write, resources } = event.payload;
  const traits = callTraits(registry, tool_name, arguments_json);
  return {
    _id: event.call_id,
    run_id: event.run_id,
    turn,
    provider_call_id,
    tool_name,
    arguments_json,
    order: order ?? 0,
    ...traits,
    // As scheduled when proposed (the locks it holds), whatever the contract in force says now.
    ...(write === undefined ? {} : { write }),
    ...(resources === undefined ? {} : { resources }),
    taint: taint ?? taintFrom([]),
    created_at: new Date(event.time),
  };
}

/**
 * Rule of Two: a run is tainted once it received a successful result from a tool whose contract marks its
 * output as untrusted content. Derived from the attached results, so every replica computes the same.
 */
export function taintOf(results: Iterable<CallResultRecord>, registry: ToolRegistry): CallRecord["taint"] {
  const sources: string[] = [];
  for (const r of results) if (r.result.ok && registry.get(r.tool_name)?.untrustedOutput === true) sources.push(r.tool_name);
  return taintFrom(sources);
}

/** The taint of a run whose successful results came from these untrusted tools. */
export function taintFrom(untrustedSources: readonly string[]): CallRecord["taint"] {
  const sources = [...new Set(untrustedSources)].sort();
  return { tainted: sources.length > 0, sources: sources.slice(0, 16) };
}

/** Names of the tools whose current contract marks their output as untrusted content. */
export function untrustedTools(registry: ToolRegistry): string[] {
  return registry
    .list()
    .filter((t) => t.untrustedOutput)
    .map((t) => t.contract.name);
}
