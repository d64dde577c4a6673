import { jetstream, type JetStreamClient } from "@nats-io/jetstream";
import { headers, type NatsConnection, type Subscription } from "@nats-io/nats-core";
import { connect } from "@nats-io/transport-node";
import { canonicalHash, EVENT_SIGNATURE_HEADER, newCallId, newRunId, nextCallEvent, type JsonValue, type Principal, type ToolRef } from "@toolgate/contracts";
import type { Stack } from "./stack.js";

/** A terminal event's result as the driver saw it. */
export interface DrivenResult {
  callId: string;
  runId: string;
  type: "completed" | "outcome_unknown";
  result: Record<string, unknown> & { ok: boolean };
  /** From publishing the authorization to receiving the terminal event. */
  ms: number;
}

const decoder = new TextDecoder();

/**
 * Drives a stack's executors directly: publishes authorizations signed with the stack's policy key (as policy
 * would) and resolves each with its terminal event, bypassing the orchestrator and policy. For benchmarks and
 * tests of the executor tier alone.
 */
export class ExecutorDriver {
  readonly #nc: NatsConnection;
  readonly #js: JetStreamClient;
  readonly #stack: Stack;
  readonly #subscriptions: Subscription[] = [];
  readonly #waiting = new Map<string, (type: DrivenResult["type"], result: DrivenResult["result"]) => void>();

  private constructor(nc: NatsConnection, stack: Stack) {
    this.#nc = nc;
    this.#js = jetstream(nc);
    this.#stack = stack;
  }

  /** Connects to NATS and listens (live, core NATS) to the stack's terminal executor events. */
  static async connect(stack: Stack, natsUrl: string): Promise<ExecutorDriver> {
    const driver = new ExecutorDriver(await connect({ servers: natsUrl }), stack);
    for (const type of ["completed", "outcome_unknown"] as const) {
      driver.#subscriptions.push(
        driver.#nc.subscribe(`${stack.name}.call.*.${type}`, {
          callback: (error, msg) => {
            if (error) return;
            const callId = msg.subject.split(".")[2]!;
            const resolve = driver.#waiting.get(callId);
            if (!resolve) return;
            const event = JSON.parse(decoder.decode(msg.data)) as { payload: { result: DrivenResult["result"] } };
            driver.#waiting.delete(callId);
            resolve(type, event.payload.result);
          },
        }),
      );
    }
    await driver.#nc.flush();
    return driver;
  }

  /** Publishes one signed authorization of `tool` with `args` and waits for its terminal event. */
  async call(
    tool: ToolRef,
    args: Record<string, JsonValue>,
    principal: Principal = { tenant: "acme", subject: "alice", roles: ["researcher"] },
    timeoutMs = 60_000,
  ): Promise<DrivenResult> {
    const callId = newCallId();
    const runId = newRunId();
    const signer = this.#stack.policySigner;
    const now = Date.now();
    const decision = {
      decision_id: `dec_${callId.slice(5)}`,
      call_id: callId,
      run_id: runId,
      tool,
      args_hash: canonicalHash(args),
      principal,
      context: {},
      policy_version: "driver",
      issued_at: new Date(now).toISOString(),
      expires_at: new Date(now + 3_600_000).toISOString(),
      key_id: signer.keyId,
    };
    const event = nextCallEvent(
      { call_id: callId, run_id: runId, principal, seq: 1 },
      "authorized",
      "policy",
      { decision, signature: signer.sign(decision), arguments: args },
      { tool, args_hash: decision.args_hash },
    );
    const started = performance.now();
    const ended = new Promise<{ type: DrivenResult["type"]; result: DrivenResult["result"] }>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#waiting.delete(callId);
        reject(new Error(`no terminal event for ${callId} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.#waiting.set(callId, (type, result) => {
        clearTimeout(timer);
        resolve({ type, result });
      });
    });
    const data = JSON.stringify(event);
    const h = headers();
    h.set(EVENT_SIGNATURE_HEADER, this.#stack.signatureFor("policy", data));
    await this.#js.publish(`${this.#stack.name}.call.${callId}.authorized`, data, { msgID: event.id, headers: h });
    const { type, result } = await ended;
    return { callId, runId, type, result, ms: performance.now() - started };
  }

  async close(): Promise<void> {
    for (const sub of this.#subscriptions) sub.unsubscribe();
    await this.#nc.close();
  }
}
