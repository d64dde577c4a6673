import { randomBytes } from "node:crypto";
import { Stack, callTool, testInfra, waitFor, waitForCallEvents, type CallResult } from "@toolgate/testkit";
import { MongoClient } from "mongodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// Prometheus metrics of the four services, scraped from their HTTP ports after a known workload: every counter
// moves by exactly what the calls did, and no label value is an id, a principal or a secret.
const METRICS_TOKEN = `mtk_${randomBytes(16).toString("hex")}`;
const SERVICES = ["orchestrator", "policy", "executor-1", "audit"] as const;
type Service = (typeof SERVICES)[number];

let stack: Stack;
let mongo: MongoClient;

beforeAll(async () => {
  const infra = testInfra();
  mongo = await new MongoClient(infra.mongoUrl).connect();
  stack = await Stack.start({
    natsUrl: infra.natsUrl,
    mongoUrl: infra.mongoUrl,
    // A tainted run's save_evidence waits for a human: the approval gauges have something to count.
    ruleOfTwo: true,
    extraEnv: { METRICS_TOKEN },
    // Tools that fail on purpose: retries, an unknown outcome and its reconciliation.
    toolsets: ["research", "chaos", "operations"],
    // The executor serves its metrics only when given a port.
    env: { executor: { HTTP_PORT: "0", EXECUTOR_RECONCILE_DELAY_MS: "300", EXECUTOR_OPERATION_POLL_MS: "200" } },
  });
});

afterAll(async () => {
  await stack?.stop();
  await mongo?.db(`${stack.name}_runtime`).dropDatabase();
  await mongo?.db(`${stack.name}_tools`).dropDatabase();
  await mongo?.close();
});

/** One sample of the exposition format: `name{label="value",…} value`. */
interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Parses Prometheus text exposition (version 0.0.4) into samples; throws on a line it cannot read. */
function parseExposition(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match) throw new Error(`not an exposition line: ${line}`);
    const labels: Record<string, string> = {};
    const labelText = match[2] ?? "";
    const labelPattern = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?/gy;
    let consumed = 0;
    for (let m = labelPattern.exec(labelText); m; m = labelPattern.exec(labelText)) {
      labels[m[1]!] = m[2]!.replace(/\\n/g, "\n").replace(/\\"/g, '"').replace(/\\\\/g, "\\");
      consumed = labelPattern.lastIndex;
    }
    if (consumed !== labelText.length) throw new Error(`unreadable labels: ${line}`);
    samples.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  return samples;
}

function portOf(service: Service): number {
  return stack.process(service).httpPort;
}

async function scrapeRaw(service: Service, token?: string): Promise<Response> {
  return fetch(`http://127.0.0.1:${portOf(service)}/metrics`, token === undefined ? {} : { headers: { authorization: `Bearer ${token}` } });
}

/** Every service's samples at one moment (scraped one after the other), and the raw texts. */
async function scrapeAll(): Promise<{ samples: Record<Service, Sample[]>; texts: string[] }> {
  const samples = {} as Record<Service, Sample[]>;
  const texts: string[] = [];
  for (const service of SERVICES) {
    const response = await scrapeRaw(service, METRICS_TOKEN);
    expect(response.status, service).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await response.text();
    texts.push(text);
    samples[service] = parseExposition(text);
  }
  return { samples, texts };
}

/** The value of the sample named `name` whose labels include `labels` (0 when there is none). */
function sampleValue(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  const found = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  expect(found.length, `${name} ${JSON.stringify(labels)}`).toBeLessThanOrEqual(1);
  return found[0]?.value ?? 0;
}

/** How far `name{labels}` moved between two scrapes of one service. */
const moved = (before: Sample[], after: Sample[], name: string, labels: Record<string, string> = {}) =>
  sampleValue(after, name, labels) - sampleValue(before, name, labels);

/** Every label name and value other than the service label, for the cardinality checks. */
const labelValues = (samples: Sample[]) => samples.flatMap((s) => Object.entries(s.labels).filter(([k]) => k !== "service"));

const search = { query: "agent state management", source_type: "official", limit: 2 };
const DOC = "https://example.test/docs/openai-agents-sdk/sessions";

async function attached(callId: string): Promise<void> {
  await waitForCallEvents(stack, callId, (events) => events.some((e) => e.type === "result_attached"));
}

describe("GET /metrics", () => {
  it("requires the metrics token when one is configured, and no API credentials", async () => {
    for (const service of SERVICES) {
      expect((await scrapeRaw(service)).status, service).toBe(401);
      expect((await scrapeRaw(service, `${METRICS_TOKEN}x`)).status, service).toBe(401);
      // An API key is not the metrics token, and the orchestrator's API-key check does not apply here.
      expect((await scrapeRaw(service, stack.apiKeys.alice)).status, service).toBe(401);
      expect((await scrapeRaw(service, METRICS_TOKEN)).status, service).toBe(200);
    }
  });

  it("counts a mixed workload exactly, by tool and outcome, with low-cardinality labels only", async () => {
    const before = await scrapeAll();
    const ids: string[] = [];
    const track = <T extends { callId: string; runId: string }>(submitted: T): T => {
      ids.push(submitted.callId, submitted.runId);
      return submitted;
    };

    // One call that runs, one rejected by validation, one denied by Cedar, one for a tool that does not exist.
    const ok = track(await callTool(stack, "search_sources", search));
    const invalid = track(
      await callTool(stack, "save_evidence", { task_id: "task_metrics", claim: "Sessions persist state.", source_url: DOC, user_id: "alice" }),
    );
    const denied = track(await callTool(stack, "search_sources", search, { user: "bob" }));
    const unknown = track(await callTool(stack, "no_such_tool_3f9a", {}));
    expect(ok.result).toMatchObject({ ok: true });
    expect(invalid.result).toMatchObject({ ok: false, error: { code: "INVALID_ARGUMENTS" } });
    expect(denied.result).toMatchObject({ ok: false, error: { code: "PERMISSION_DENIED" } });
    expect(unknown.result).toMatchObject({ ok: false, error: { code: "UNKNOWN_TOOL" } });

    // Host idempotency: a keyed submission, its retry (replayed) and the key reused for another body (422).
    const key = `metrics-${randomBytes(6).toString("hex")}`;
    const keyed = async (body: unknown) => {
      const response = await fetch(`${stack.orchestratorUrl}/v1/tool-calls`, {
        method: "POST",
        headers: { authorization: `Bearer ${stack.apiKeys.alice}`, "content-type": "application/json", "idempotency-key": key },
        body: JSON.stringify(body),
      });
      return { status: response.status, replayed: response.headers.get("idempotent-replayed"), body: (await response.json()) as Record<string, unknown> };
    };
    const keyedBody = { calls: [{ id: "h1", name: "search_sources", arguments: search }], wait_ms: 30_000 };
    const first = await keyed(keyedBody);
    expect(first.status).toBe(200);
    const firstResults = first.body.results as { call_id: string; result: CallResult }[];
    expect(firstResults[0]!.result.ok).toBe(true);
    track({ callId: firstResults[0]!.call_id, runId: first.body.run_id as string });
    expect((await keyed(keyedBody)).replayed).toBe("true");
    expect((await keyed({ ...keyedBody, calls: [{ id: "h1", name: "search_sources", arguments: { ...search, limit: 3 } }] })).status).toBe(422);

    // An approval: a tainted run's write waits for a human, who denies it.
    // (The run's own task: saving into it is what the resource policy permits.)
    const readAnswer = await stack.api<{ run_id: string; results: { call_id: string; result?: CallResult }[] }>("POST", "/v1/tool-calls", {
      context: { task_id: "task_metrics" },
      calls: [{ id: "h1", name: "fetch_document", arguments: { url: DOC } }],
      wait_ms: 30_000,
    });
    const read = track({ callId: readAnswer.body.results[0]!.call_id, runId: readAnswer.body.run_id, result: readAnswer.body.results[0]!.result });
    expect(read.result).toMatchObject({ ok: true });
    const pendingSave = await stack.api<{ results: { call_id: string; status: string }[] }>("POST", "/v1/tool-calls", {
      run_id: read.runId,
      calls: [{ id: "h2", name: "save_evidence", arguments: { task_id: "task_metrics", claim: "Sessions persist state.", source_url: DOC } }],
      wait_ms: 0,
    });
    expect(pendingSave.status).toBe(202);
    const saveId = pendingSave.body.results[0]!.call_id;
    ids.push(saveId);
    const requested = (await waitForCallEvents(stack, saveId, (es) => es.some((e) => e.type === "approval_requested"))).find(
      (e) => e.type === "approval_requested",
    )!;
    const approvalId = requested.payload.approval_id as string;
    ids.push(approvalId);
    const waiting = await waitFor(
      async () => {
        const { samples } = await scrapeAll();
        return sampleValue(samples.policy, "toolgate_approvals_pending") === 1 ? samples.policy : undefined;
      },
      { timeoutMs: 10_000, description: "policy to report one pending approval" },
    );
    const age = sampleValue(waiting, "toolgate_approval_oldest_pending_age_seconds");
    expect(age).toBeGreaterThanOrEqual(0);
    expect(age).toBeLessThan(60);
    expect((await stack.policyApi("POST", `/v1/approvals/${approvalId}/deny`, { reason: "not now" })).status).toBe(200);

    // Every call's result is attached: the orchestrator counts an outcome before it publishes result_attached.
    for (const callId of [ok.callId, invalid.callId, denied.callId, unknown.callId, firstResults[0]!.call_id, read.callId, saveId]) await attached(callId);
    // Audit verifies one call's chain and one run's.
    expect((await stack.audit<{ ok: boolean }>(`/v1/calls/${ok.callId}/verify`)).body.ok).toBe(true);
    expect((await stack.audit<{ ok: boolean }>(`/v1/runs/${ok.runId}/verify`)).body.ok).toBe(true);
    // A ledger block changed behind audit's back: the denied call's chain no longer verifies.
    const blocks = mongo.db(`${stack.name}_runtime`).collection<{ _id: string; chain_id: string[]; hash: string }>("audit_log");
    expect((await blocks.updateOne({ chain_id: denied.callId }, { $set: { hash: `sha256:${"0".repeat(64)}` } })).modifiedCount).toBe(1);
    expect((await stack.audit<{ ok: boolean }>(`/v1/calls/${denied.callId}/verify`)).body.ok).toBe(false);

    // No approval waits any more: the scrape now holds the whole workload.
    await waitFor(
      async () => {
        const { samples } = await scrapeAll();
        return sampleValue(samples.policy, "toolgate_approvals_pending") === 0;
      },
      { timeoutMs: 10_000, description: "policy to report no pending approval" },
    );
    const after = await scrapeAll();
    const o = [before.samples.orchestrator, after.samples.orchestrator] as const;
    const p = [before.samples.policy, after.samples.policy] as const;
    const e = [before.samples["executor-1"], after.samples["executor-1"]] as const;
    const a = [before.samples.audit, after.samples.audit] as const;

    // Calls by tool and outcome, once each: 7 calls.
    const calls = (tool: string, outcome: string) => moved(...o, "toolgate_calls_total", { tool, outcome });
    expect(calls("search_sources", "ok")).toBe(2);
    expect(calls("fetch_document", "ok")).toBe(1);
    expect(calls("save_evidence", "INVALID_ARGUMENTS")).toBe(1);
    expect(calls("search_sources", "PERMISSION_DENIED")).toBe(1);
    expect(calls("<unknown>", "UNKNOWN_TOOL")).toBe(1);
    expect(calls("save_evidence", "APPROVAL_DENIED")).toBe(1);
    const allCalls = after.samples.orchestrator.filter((s) => s.name === "toolgate_calls_total").reduce((n, s) => n + s.value, 0);
    expect(allCalls - before.samples.orchestrator.filter((s) => s.name === "toolgate_calls_total").reduce((n, s) => n + s.value, 0)).toBe(7);

    // Host idempotency decisions.
    const decisions = (decision: string) => moved(...o, "toolgate_host_idempotency_decisions_total", { decision });
    expect([decisions("claimed"), decisions("replay"), decisions("mismatch"), decisions("in_flight"), decisions("taken_over")]).toEqual([1, 1, 1, 0, 0]);

    // Policy decisions by verdict (the human's denial is not one of them).
    const decided = (verdict: string) => moved(...p, "toolgate_policy_decision_duration_seconds_count", { verdict });
    expect([decided("authorized"), decided("rejected"), decided("denied"), decided("approval_required")]).toEqual([3, 2, 1, 1]);
    expect(moved(...p, "toolgate_policy_decision_duration_seconds_bucket", { verdict: "authorized", le: "+Inf" })).toBe(3);
    expect(moved(...p, "toolgate_policy_decision_duration_seconds_sum", { verdict: "authorized" })).toBeGreaterThan(0);

    // Executions by tool: the three calls that ran.
    expect(moved(...e, "toolgate_tool_execution_duration_seconds_count", { tool: "search_sources" })).toBe(2);
    expect(moved(...e, "toolgate_tool_execution_duration_seconds_count", { tool: "fetch_document" })).toBe(1);
    expect(moved(...e, "toolgate_tool_execution_duration_seconds_count", { tool: "save_evidence" })).toBe(0);
    for (const name of ["toolgate_retries_total", "toolgate_dead_letters_total", "toolgate_outcome_unknown_total", "toolgate_executor_idempotency_total"]) {
      expect(
        after.samples["executor-1"].filter((s) => s.name === name).reduce((n, s) => n + s.value, 0),
        name,
      ).toBe(0);
    }

    // Bus counters come from the bus's own counts: first deliveries of proposals to policy, of authorizations to
    // the executor, and what policy published.
    const firstDeliveries = (samples: readonly [Sample[], Sample[]], consumer: string) =>
      moved(...samples, "toolgate_consumer_deliveries_total", { consumer }) - moved(...samples, "toolgate_consumer_redeliveries_total", { consumer });
    expect(firstDeliveries(p, "policy")).toBe(7);
    expect(firstDeliveries(e, "executor")).toBe(3);
    expect(moved(...p, "toolgate_events_published_total", { kind: "call", type: "rejected" })).toBe(2);
    expect(moved(...p, "toolgate_events_published_total", { kind: "call", type: "authorized" })).toBe(3);
    expect(moved(...p, "toolgate_events_published_total", { kind: "call", type: "approval_requested" })).toBe(1);

    // Consumer lag, read from the server at scrape time: each service reports its own durables, and once the
    // stack has caught up with the workload none has a backlog.
    await stack.quiesce();
    const settled = await scrapeAll();
    const lagOf = (service: Service) =>
      settled.samples[service]
        .filter((s) => s.name === "toolgate_consumer_pending_messages" || s.name === "toolgate_consumer_ack_pending_messages")
        .map((s) => `${s.labels.consumer}:${s.value}`)
        .sort();
    expect(lagOf("policy")).toContain("policy:0");
    expect(lagOf("executor-1")).toContain("executor:0");
    expect(lagOf("audit").length).toBeGreaterThan(0);
    expect([...lagOf("orchestrator"), ...lagOf("policy"), ...lagOf("executor-1"), ...lagOf("audit")].filter((l) => !l.endsWith(":0"))).toEqual([]);

    // Audit's verifications.
    expect(moved(...a, "toolgate_audit_verifications_total", { scope: "call", result: "ok" })).toBe(1);
    expect(moved(...a, "toolgate_audit_verifications_total", { scope: "run", result: "ok" })).toBe(1);
    expect(moved(...a, "toolgate_audit_verifications_total", { scope: "call", result: "broken" })).toBe(1);
    expect(moved(...a, "toolgate_audit_verifications_total", { scope: "run", result: "broken" })).toBe(0);

    // Default process metrics, labelled by service.
    for (const service of SERVICES) {
      expect(sampleValue(after.samples[service], "process_cpu_seconds_total"), service).toBeGreaterThan(0);
      expect(new Set(after.samples[service].map((s) => s.labels.service))).toEqual(new Set([service.replace(/-\d+$/, "")]));
    }

    // No label value is an id, a principal or a secret; no secret appears anywhere in a scrape.
    const secrets = [...Object.values(stack.apiKeys), METRICS_TOKEN];
    for (const service of SERVICES) {
      for (const [name, value] of labelValues(after.samples[service])) {
        // Runtime ids end in a ULID (26 characters of Crockford's base 32).
        expect(value, `${service} ${name}`).not.toMatch(/[0-9A-HJKMNP-TV-Z]{26}/);
        expect(ids, `${service} ${name}`).not.toContain(value);
        expect(["alice", "bob", "carol", "acme"], `${service} ${name}`).not.toContain(value);
      }
    }
    for (const text of after.texts) {
      for (const secret of secrets) expect(text).not.toContain(secret);
      for (const id of ids) expect(text).not.toContain(id);
    }
  });

  it("counts retries, an unknown outcome and its reconciliation by tool", async () => {
    const before = await scrapeAll();
    const flaky = await callTool(stack, "chaos_flaky", { n: 1, failures: 2, code: "UPSTREAM_UNAVAILABLE", retry_after_ms: 100 });
    expect(flaky.result).toMatchObject({ ok: true, data: { attempts: 3 } });
    const write = await callTool(stack, "chaos_write", { n: 1, delay_ms: 3_000, effect: "before_delay" });
    expect(write.result).toMatchObject({ ok: false, error: { code: "OUTCOME_UNKNOWN" } });
    // The reconciliation is counted when it is settled, before its `reconciled` event is published.
    await waitForCallEvents(stack, write.callId, (es) => es.some((e) => e.type === "reconciled"), { description: "the reconciliation" });
    await attached(flaky.callId);
    await attached(write.callId);
    const after = await scrapeAll();
    const o = [before.samples.orchestrator, after.samples.orchestrator] as const;
    const e = [before.samples["executor-1"], after.samples["executor-1"]] as const;
    expect(moved(...e, "toolgate_retries_total", { tool: "chaos_flaky", code: "UPSTREAM_UNAVAILABLE" })).toBe(2);
    expect(moved(...e, "toolgate_tool_execution_duration_seconds_count", { tool: "chaos_flaky" })).toBe(3);
    expect(moved(...e, "toolgate_outcome_unknown_total", { tool: "chaos_write" })).toBe(1);
    expect(moved(...e, "toolgate_reconciliations_total", { tool: "chaos_write", outcome: "applied" })).toBe(1);
    expect(moved(...e, "toolgate_dead_letters_total", { tool: "chaos_write" })).toBe(0);
    // Each retry is a delivery of the same authorization again, after its delay.
    expect(moved(...e, "toolgate_consumer_redeliveries_total", { consumer: "executor" })).toBe(2);
    expect(moved(...o, "toolgate_calls_total", { tool: "chaos_flaky", outcome: "ok" })).toBe(1);
    expect(moved(...o, "toolgate_calls_total", { tool: "chaos_write", outcome: "OUTCOME_UNKNOWN" })).toBe(1);
  });

  it("counts a managed run's budget stop by its reason, and the calls it made", async () => {
    const before = await scrapeAll();
    const started = await stack.api<{ run_id: string }>("POST", "/v1/runs", {
      model: "scripted:loop-varied",
      input: "Research agent state management (task_id=task_metrics).",
      context: { task_id: "task_metrics" },
      budgets: { max_tool_calls: 2 },
    });
    expect(started.status).toBe(202);
    // The trail is complete once the run's end and every call's result_attached are in: both are published after
    // they are counted.
    const trace = await stack.trace(started.body.run_id);
    expect(trace.find((e) => e.event.kind === "run" && e.event.type === "stopped")?.event.payload.reason).toBe("budget_tool_calls");
    const proposed = trace.filter((e) => e.event.type === "proposed").length;
    expect(proposed).toBeGreaterThan(0);
    const after = await scrapeAll();
    const o = [before.samples.orchestrator, after.samples.orchestrator] as const;
    const total = (samples: Sample[], name: string) => samples.filter((x) => x.name === name).reduce((n, x) => n + x.value, 0);
    expect(moved(...o, "toolgate_runs_stopped_total", { reason: "budget_tool_calls" })).toBe(1);
    expect(total(o[1], "toolgate_runs_stopped_total") - total(o[0], "toolgate_runs_stopped_total")).toBe(1);
    expect(moved(...o, "toolgate_calls_total", { tool: "search_sources", outcome: "ok" })).toBe(proposed);
    expect(total(o[1], "toolgate_calls_total") - total(o[0], "toolgate_calls_total")).toBe(proposed);
    for (const [name, value] of labelValues(after.samples.orchestrator)) expect(value, name).not.toContain(started.body.run_id);
  });
});
