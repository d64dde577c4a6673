import { createHash } from "node:crypto";
import type { ToolgateEvent } from "@toolgate/contracts";
import { OtlpReceiver, Stack, testInfra, waitFor, waitForCallEvents, type ReceivedSpan, type RunView } from "@toolgate/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REFUND } from "./fixtures/refund-contract.js";

// Issue 14, items 1 and 5: every service exports its spans over OTLP/HTTP (the SDK's exporter, batched) to a
// receiver on loopback, and a C04 run is one connected trace across the four processes; every log line about a
// call names its trace, call and run. A refund with sensitive arguments waits for an approver (who denies it), so
// the approval's span is there too, and no secret or sensitive argument may reach any span.
const INPUT = "Research task task_id=task_c04: find official documentation on OpenAI Agents SDK state management and save one claim.";
const SECRET_CARD = "4111111111111111";
const SECRET_TOKEN = "tok_live_5e4d3c2b1a0f9e8d";
const SERVICES = ["orchestrator", "policy", "executor", "audit"] as const;

/** The run's trace id as every service derives it (README, "Events and subjects"). */
const runTraceId = (runId: string) => createHash("sha256").update(runId).digest("hex").slice(0, 32);

let receiver: OtlpReceiver;
let stack: Stack;
let run: RunView;
let refund: { callId: string; runId: string; approvalId: string };

beforeAll(async () => {
  const infra = testInfra();
  receiver = await OtlpReceiver.start();
  const otel = {
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
    OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
    // Batches leave every 200 ms instead of every 5 s: the test waits on what arrived, not on a clock.
    OTEL_BSP_SCHEDULE_DELAY: "200",
  };
  stack = await Stack.start({
    natsUrl: infra.natsUrl,
    mongoUrl: infra.mongoUrl,
    logLevel: "debug",
    env: Object.fromEntries(SERVICES.map((s) => [s, otel])),
  });
  await stack.publishContract(REFUND);

  run = await stack.runToEnd("scripted:c04", INPUT, { task_id: "task_c04" });
  expect(run.status).toBe("completed");

  const response = await fetch(`${stack.orchestratorUrl}/v1/tool-calls`, {
    method: "POST",
    headers: { authorization: `Bearer ${await stack.jwt({ sub: "alice", roles: ["researcher"] })}`, "content-type": "application/json" },
    body: JSON.stringify({
      context: { task_id: "task_c04" },
      calls: [
        {
          id: "r1",
          name: "issue_refund",
          arguments: { order_id: "ord_1", amount_cents: 500, card_number: SECRET_CARD, auth: { account: "acct_1", token: SECRET_TOKEN }, reason: "damaged" },
        },
      ],
      wait_ms: 0,
    }),
  });
  expect(response.status).toBe(202);
  const submitted = (await response.json()) as { run_id: string; results: { call_id: string }[] };
  const callId = submitted.results[0]!.call_id;
  const events = await waitForCallEvents(stack, callId, (es) => es.some((e) => e.type === "approval_requested"));
  const approvalId = events.find((e) => e.type === "approval_requested")!.payload.approval_id as string;
  expect((await stack.policyApi("POST", `/v1/approvals/${approvalId}/deny`, { reason: "not asked for" })).status).toBe(200);
  await waitForCallEvents(stack, callId, (es) => es.some((e) => e.type === "result_attached"));
  refund = { callId, runId: submitted.run_id, approvalId };
}, 120_000);

afterAll(async () => {
  await stack?.stop();
  await receiver?.stop();
});

/**
 * The spans of `runId`'s trace once audit's span of each trail its audit trail (or `callId`'s) closes has arrived:
 * audit records one span per call (at its result_attached) and one per run (at its end).
 */
async function traceOf(runId: string, callId?: string): Promise<ReceivedSpan[]> {
  const audited = callId
    ? (await stack.audit<{ events: { event: ToolgateEvent }[] }>(`/v1/calls/${callId}/events`)).body.events.map((e) => e.event)
    : (await stack.trace(runId)).map((e) => e.event);
  const closing = audited.filter((e) => e.type === "result_attached" || (e.kind === "run" && (e.type === "completed" || e.type === "stopped")));
  expect(closing.length).toBeGreaterThan(0);
  const traceId = runTraceId(runId);
  return waitFor(
    () => {
      const spans = receiver.spans().filter((s) => s.traceId === traceId);
      const seen = new Set(spans.filter((s) => s.service === "toolgate-audit").map((s) => s.attributes["messaging.message.id"]));
      return closing.every((e) => seen.has(e.id)) ? spans : undefined;
    },
    { description: `audit's spans of every trail of ${runId}`, timeoutMs: 30_000 },
  );
}

describe("traces over OTLP", () => {
  it("makes a C04 run one connected trace across the four services, with a span per turn and per step of each call", async () => {
    // The run's span is recorded when the run ends: wait for it too.
    const spans = await waitFor(
      async () => {
        const all = await traceOf(run.run_id);
        return all.some((s) => s.name === "invoke_agent") ? all : undefined;
      },
      { description: "the run's span" },
    );
    expect(receiver.refused).toEqual([]);
    const byId = new Map(spans.map((s) => [s.spanId, s]));
    expect(byId.size).toBe(spans.length);

    // One root, the run's, and every other span's parent is in the trace: one tree.
    const roots = spans.filter((s) => s.parentSpanId === "");
    expect(roots.map((s) => [s.name, s.service])).toEqual([["invoke_agent", "toolgate-orchestrator"]]);
    const root = roots[0]!;
    expect(root.attributes).toMatchObject({
      "gen_ai.operation.name": "invoke_agent",
      "gen_ai.request.model": "scripted:c04",
      "toolgate.run_id": run.run_id,
      "toolgate.status": "completed",
      "toolgate.tool_calls": 3,
    });
    expect(spans.filter((s) => !byId.has(s.parentSpanId) && s !== root).map((s) => `${s.service} ${s.name}`)).toEqual([]);
    expect(new Set(spans.map((s) => s.service))).toEqual(new Set(SERVICES.map((s) => `toolgate-${s}`)));

    // A span per model turn, under the run's span: three turns with tool calls and the final answer.
    const turns = spans.filter((s) => s.attributes["gen_ai.operation.name"] === "chat");
    expect(turns.map((t) => [t.name, t.attributes["toolgate.turn"], t.parentSpanId])).toEqual(
      [0, 1, 2, 3].map((turn) => ["chat scripted:c04", turn, root.spanId]).sort(),
    );

    for (const call of run.calls) {
      const ofCall = spans.filter((s) => s.attributes["toolgate.call_id"] === call.call_id);
      const step = (name: string, service: string) => {
        const found = ofCall.filter((s) => s.name === name && s.service === `toolgate-${service}`);
        expect(
          found.map((s) => s.name),
          `${name} of ${call.tool}`,
        ).toEqual([name]);
        return found[0]!;
      };
      const proposal = step("propose_tool_call", "orchestrator");
      expect(byId.get(proposal.parentSpanId)?.attributes["gen_ai.operation.name"]).toBe("chat");
      expect(proposal.attributes).toMatchObject({ "gen_ai.tool.name": call.tool, "gen_ai.tool.call.id": call.provider_call_id, "toolgate.run_id": run.run_id });
      const decision = step("policy_decision", "policy");
      const execution = step(`execute_tool ${call.tool}`, "executor");
      const attach = step("attach_result", "orchestrator");
      // Each step is the consumer span of the message the step before it published: one hop, one span.
      expect(byId.get(decision.parentSpanId)).toBe(proposal);
      expect(byId.get(execution.parentSpanId)).toBe(decision);
      expect(byId.get(attach.parentSpanId)).toBe(execution);
      expect(execution.kind).toBe(5);
      expect(execution.attributes).toMatchObject({
        "messaging.system": "nats",
        "messaging.operation.type": "process",
        "messaging.consumer.group.name": "executor",
        "messaging.destination.template": `${stack.name}.call.{call_id}.authorized`,
        "messaging.destination.name": `${stack.name}.call.${call.call_id}.authorized`,
      });
      // No span per publish, none per message a step does not start.
      expect(ofCall.filter((s) => s.name.startsWith("publish ") || s.name.startsWith("process ")).map((s) => s.name)).toEqual([]);

      expect(decision.attributes).toMatchObject({
        "gen_ai.tool.name": call.tool,
        "toolgate.schema_version": expect.any(String),
        "toolgate.step": "policy_decision",
      });
      expect(execution.attributes).toMatchObject({
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.tool,
        "toolgate.call_id": call.call_id,
        "toolgate.run_id": run.run_id,
        "toolgate.schema_version": decision.attributes["toolgate.schema_version"],
        "toolgate.idempotency_key_hash": expect.stringMatching(/^sha256:[0-9a-f]{64}$/),
        "toolgate.status": "ok",
        "toolgate.duration_ms": expect.any(Number),
        "toolgate.attempt": 1,
      });
      // The attempt and its end are events of the execution span.
      expect(execution.events.map((e) => [e.name, e.attributes["toolgate.attempt"]])).toEqual([
        ["started", 1],
        ["completed", 1],
      ]);
      expect(attach.attributes).toMatchObject({ "toolgate.status": "ok", "gen_ai.tool.call.id": call.provider_call_id });
      // Audit stored the call's trail: one span, when the result attached closed it, under the attach.
      const audit = step("audit_record", "audit");
      expect(byId.get(audit.parentSpanId)).toBe(attach);
      expect(audit.attributes).toMatchObject({ "toolgate.step": "audit", "messaging.consumer.group.name": "audit" });
    }
  });

  it("puts a human's approval wait in the call's trace, and no secret or sensitive argument in any span", async () => {
    // Each service exports its spans in batches of its own: audit's may reach the receiver before policy's.
    const spans = await waitFor(
      async () => {
        const all = await traceOf(refund.runId, refund.callId);
        const of = (name: string) => all.some((s) => s.name === name && s.attributes["toolgate.call_id"] === refund.callId);
        return of("approval_wait") && of("propose_tool_call") && of("attach_result") ? all : undefined;
      },
      { description: "the refund's proposal, approval wait and attach spans" },
    );
    const wait = spans.find((s) => s.name === "approval_wait");
    expect(wait?.service).toBe("toolgate-policy");
    expect(wait?.attributes).toMatchObject({
      "toolgate.approval_id": refund.approvalId,
      "toolgate.call_id": refund.callId,
      "toolgate.approval.outcome": "denied",
      "gen_ai.tool.name": "issue_refund",
    });
    const proposal = spans.find((s) => s.name === "propose_tool_call" && s.attributes["toolgate.call_id"] === refund.callId);
    expect(wait?.parentSpanId).toBe(proposal?.spanId);
    // A host-driven run's trace has its root too, recorded when the run was created: the host's call hangs under it.
    const roots = spans.filter((s) => s.parentSpanId === "");
    expect(roots.map((s) => [s.name, s.service, s.attributes["toolgate.run.driver"]])).toEqual([["host_run", "toolgate-orchestrator", "host"]]);
    expect(proposal?.parentSpanId).toBe(roots[0]?.spanId);
    const byId = new Set(spans.map((s) => s.spanId));
    expect(spans.filter((s) => s.parentSpanId !== "" && !byId.has(s.parentSpanId)).map((s) => `${s.service} ${s.name}`)).toEqual([]);
    // The denial the approver's request published is in the wait's span, and ends the call.
    expect(wait?.events.map((e) => [e.name, e.attributes["toolgate.error_code"]])).toEqual([["denied", "APPROVAL_DENIED"]]);
    const attach = spans.find((s) => s.name === "attach_result" && s.attributes["toolgate.call_id"] === refund.callId);
    expect(attach?.attributes).toMatchObject({ "toolgate.status": "error", "toolgate.error_code": "APPROVAL_DENIED" });

    const secrets = [...stack.secrets(), SECRET_CARD, SECRET_TOKEN, "acct_1"];
    const needles = secrets.flatMap((secret) => [secret, secret.slice(-12)]);
    const everything = receiver.spans().map((s) => ({ span: `${s.service} ${s.name}`, text: JSON.stringify([s.name, s.resource, s.attributes, s.events]) }));
    // Not vacuous: the C04 run's turns and its calls' five steps each, and the refund's spans.
    expect(everything.length).toBeGreaterThan(run.calls.length * 5 + 5);
    expect(everything.filter((s) => needles.some((n) => s.text.includes(n))).map((s) => s.span)).toEqual([]);
    // Nor the user's request or the arguments' other values: spans carry ids, names, counts and outcomes.
    for (const value of ["ord_1", "damaged", "OpenAI Agents SDK state management"]) {
      expect(everything.filter((s) => s.text.includes(value)).map((s) => s.span)).toEqual([]);
    }
  });
});

describe("log correlation", () => {
  it("gives every line any service logged about a call its trace_id, call_id and run_id", async () => {
    const calls = [...run.calls.map((c) => ({ callId: c.call_id, runId: run.run_id })), { callId: refund.callId, runId: refund.runId }];
    const lines = stack.processes.flatMap((p) => p.logs().map((line) => ({ service: p.name, line, text: JSON.stringify(line) })));
    let about = 0;
    for (const { callId, runId } of calls) {
      const concerning = lines.filter((l) => l.text.includes(callId));
      about += concerning.length;
      const missing = concerning.filter((l) => l.line.call_id !== callId || l.line.run_id !== runId || l.line.trace_id !== runTraceId(runId));
      expect(missing.map((l) => `${l.service}: ${l.text.slice(0, 300)}`)).toEqual([]);
    }
    // Not vacuous: at debug level policy logs each authorization, and the refund's approval is logged.
    const messages = new Set(lines.filter((l) => calls.some((c) => l.text.includes(c.callId))).map((l) => `${l.service}: ${String(l.line.msg)}`));
    expect(messages).toContain("policy: authorized");
    expect(messages).toContain("policy: approval decided");
    expect(about).toBeGreaterThanOrEqual(run.calls.length + 1);
  });
});
