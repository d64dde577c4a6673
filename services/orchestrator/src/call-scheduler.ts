import type { EventBus } from "@toolgate/bus";
import { canonicalHash, jsonDepth, nextCallEvent, type CallId, type RunId } from "@toolgate/contracts";
import { resourceKeys, type ToolRegistry } from "@toolgate/registry";
import type { Logger } from "@toolgate/telemetry";
import type { ResourceLocks } from "./resource-locks.js";
import type { CallRecord, RunRecord, RunStore } from "./run-store.js";

/** What the scheduler needs to know about a proposed call, derived once when the model proposes it. */
export interface CallTraits {
  /** Writes (side effect `write` or `external`) run one after another; reads run in parallel. */
  write: boolean;
  /** Resources the call acts on (`<type>:<id>` from the contract's resource pointers), locked while a write runs. */
  resources: string[];
  /** Tool plus canonical arguments: identical repeated calls share it. */
  signature: string;
  /**
   * Hash of the normalized arguments, as policy computes it, when they are valid: the executor's result must
   * be bound to it (or to the hash of the signed authorization, when the contract changed in between).
   */
  args_hash?: string;
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
      args_hash: checked.argsHash,
    };
  }
  let args: unknown;
  // Measured before anything recurses: arguments nested deeper than any contract allows are hashed as text
  // (canonicalization and JSON.stringify of 10,000 levels overflow the stack). Policy rejects them.
  if (jsonDepth(argumentsJson, MAX_TRAIT_DEPTH) <= MAX_TRAIT_DEPTH) {
    try {
      args = JSON.parse(argumentsJson);
    } catch {
      args = undefined;
    }
  }
  const signature = args === undefined ? canonicalHash({ tool: toolName, raw: argumentsJson }) : safeHash({ tool: toolName, args });
  return { write: false, resources: [], signature };
}

/** The deepest arguments any contract admits (`limits.max_depth` is at most 64). */
const MAX_TRAIT_DEPTH = 64;

function safeHash(value: unknown): string {
  try {
    return canonicalHash(value);
  } catch {
    return canonicalHash(JSON.stringify(value) ?? "");
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
  /** Calls this process already published, so a re-run does not publish them again. */
  readonly #proposed = new Set<CallId>();
  /** Runs with a write waiting for a lock, retried by the sweeper. */
  readonly blocked = new Map<RunId, number>();

  constructor(deps: { store: RunStore; bus: EventBus; locks: ResourceLocks; logger: Logger }) {
    this.#store = deps.store;
    this.#bus = deps.bus;
    this.#locks = deps.locks;
    this.#log = deps.logger;
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
        this.#log.debug({ call_id: nextWrite._id, resources: nextWrite.resources }, "write waits for a resource lock");
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
    await this.#bus.publish(
      nextCallEvent({ call_id: call._id, run_id: run._id, principal: run.principal, seq: 0 }, "proposed", "orchestrator", {
        provider_call_id: call.provider_call_id,
        tool_name: call.tool_name,
        arguments_json: call.arguments_json,
        context: run.context,
        turn: call.turn,
        taint: call.taint,
      }),
    );
    this.#proposed.add(call._id);
  }
}
