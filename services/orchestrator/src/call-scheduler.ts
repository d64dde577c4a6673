import type { EventBus } from "@toolgate/bus";
import { canonicalHash, nextCallEvent, type CallId, type RunId } from "@toolgate/contracts";
import { jsonDepth, MAX_ARGUMENT_DEPTH, resourceKeys, type ToolRegistry } from "@toolgate/registry";
import { stepKey, type Logger, type RunTraces } from "@toolgate/telemetry";
import type { ResourceLocks } from "./resource-locks.js";
import type { CallRecord, RunRecord, RunStore } from "./run-store.js";
import { startProposalSpan } from "./run-spans.js";

/** What the scheduler needs to know about a proposed call, derived once when the model proposes it. */
export interface CallTraits {
  /** Writes (side effect `write` or `external`) run one after another; reads run in parallel. */
  write: boolean;
  /** Resources the call acts on (`<type>:<id>` from the contract's resource pointers), locked while a write runs. */
  resources: string[];
  /** Tool plus canonical arguments: identical repeated calls share it. */
  signature: string;
}

/**
 * Derives a call's traits from the compiled contract it names and its arguments, normalized exactly as policy
 * will normalize them (strict parse, defaults applied), so the resources a write locks are the resources policy
 * authorizes. Unknown tools and invalid arguments count as reads without resources: policy rejects them before
 * anything runs.
 */
export function callTraits(registry: ToolRegistry, toolName: string, argumentsJson: string): CallTraits {
  const tool = registry.get(toolName);
  const checked = tool ? registry.checkArguments(tool, argumentsJson) : undefined;
  if (tool && checked?.ok) {
    return {
      write: tool.writes,
      resources: resourceKeys(tool.resources(checked.arguments)),
      signature: canonicalHash({ tool: toolName, args: checked.arguments }),
    };
  }
  return { write: false, resources: [], signature: refusedSignature(toolName, argumentsJson) };
}

/**
 * The signature of arguments no contract accepts: of their parsed value where that is safe to walk (so that
 * the same call sent twice with other spacing is the same call), else of their text — never recursing
 * through a value nested deeper than any contract allows.
 */
function refusedSignature(toolName: string, argumentsJson: string): string {
  const raw = () => canonicalHash({ tool: toolName, raw: argumentsJson });
  if (jsonDepth(argumentsJson) > MAX_ARGUMENT_DEPTH) return raw();
  let args: unknown;
  try {
    args = JSON.parse(argumentsJson);
  } catch {
    return raw();
  }
  try {
    return canonicalHash({ tool: toolName, args });
  } catch {
    // A value canonical JSON cannot hold (a lone surrogate, say): hashed as JSON text.
    return canonicalHash(JSON.stringify({ tool: toolName, args }));
  }
}

/**
 * Decides which calls of a turn are proposed when: every read at once, writes one after another in the
 * model's order, and a write only while it holds the locks of the resources it touches (across runs and
 * replicas). Re-running it is safe: proposals are idempotent by event id.
 */
export class CallScheduler {
  readonly #store: RunStore;
  readonly #bus: EventBus;
  readonly #locks: ResourceLocks;
  readonly #log: Logger;
  readonly #traces: RunTraces | undefined;
  /** Calls this process already published, so a re-run does not publish them again. */
  readonly #proposed = new Set<CallId>();
  /** Runs with a write waiting for a lock, retried by the sweeper. */
  readonly blocked = new Map<RunId, number>();

  constructor(deps: { store: RunStore; bus: EventBus; locks: ResourceLocks; logger: Logger; traces?: RunTraces | undefined }) {
    this.#store = deps.store;
    this.#bus = deps.bus;
    this.#locks = deps.locks;
    this.#log = deps.logger;
    this.#traces = deps.traces;
  }

  /**
   * Proposes what may run now of `turn`; returns true when a write is waiting for a lock. `calls` and `done`
   * (the calls that have their outcome) are read from the store when the caller does not know them.
   */
  async schedule(run: RunRecord, turn: number, calls?: readonly CallRecord[], done?: ReadonlySet<CallId>): Promise<boolean> {
    const all = calls ?? (await this.#store.callsOfTurn(run._id, turn));
    done ??= new Set((await this.#store.resultsOfTurn(run._id, turn)).map((r) => r._id));
    const ordered = [...all].sort((a, b) => a.order - b.order);
    const pending: Promise<void>[] = [];
    for (const call of ordered) if (!call.write && !done.has(call._id)) pending.push(this.#propose(run, call));
    const nextWrite = ordered.find((c) => c.write && !done.has(c._id));
    let blocked = false;
    if (nextWrite) {
      if (await this.#locks.acquire(nextWrite.resources, nextWrite._id)) pending.push(this.#propose(run, nextWrite));
      else {
        blocked = true;
        this.#log.debug({ call_id: nextWrite._id, run_id: run._id, resources: nextWrite.resources }, "write waits for a resource lock");
      }
    }
    await Promise.all(pending);
    if (blocked) this.blocked.set(run._id, turn);
    else this.blocked.delete(run._id);
    return blocked;
  }

  /** Releases what a finished call held, so the next write on those resources can run. */
  async finished(call: CallRecord): Promise<void> {
    this.#proposed.delete(call._id);
    if (call.write && call.resources.length > 0) await this.#locks.release(call.resources, call._id);
  }

  async #propose(run: RunRecord, call: CallRecord): Promise<void> {
    if (this.#proposed.has(call._id)) return;
    const event = nextCallEvent({ call_id: call._id, run_id: run._id, principal: run.principal, seq: 0 }, "proposed", "orchestrator", {
      provider_call_id: call.provider_call_id,
      tool_name: call.tool_name,
      arguments_json: call.arguments_json,
      context: run.context,
      turn: call.turn,
      order: call.order,
      write: call.write,
      resources: call.resources,
      taint: call.taint,
    });
    const traces = this.#traces;
    if (!traces) await this.#bus.publish(event);
    else {
      const span = startProposalSpan(traces, run, call);
      await traces.within(stepKey("call", call._id), span, () => this.#bus.publish(event)).finally(() => span.end());
    }
    this.#proposed.add(call._id);
  }
}
