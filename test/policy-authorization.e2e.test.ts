import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { generateKeyPairSync } from "node:crypto";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { canonicalHash, decisionSigner, eventId, newCallId, newRunId, type Decision, type DecisionSigner } from "@toolgate/contracts";
import { Stack, testInfra, waitFor, waitForCallEvents, type AuditedEvent, type CallResult, type STACK_USERS } from "@toolgate/testkit";
import { MongoClient } from "mongodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// Authorization through the real services: Cedar at tool and resource level for the authenticated principal,
// reasons and policy version on every decision, reload without restart, quotas, and signed decisions.
let stack: Stack;
let nc: NatsConnection;
let mongo: MongoClient;

/** The quota's fixed window: an hour, so that the test's calls fall in one (see the quota test). */
const QUOTA_WINDOW_MS = 3_600_000;
const QUOTAS = { quotas: [{ id: "fetch-test", tool: "fetch_document", limit: 2, window_ms: QUOTA_WINDOW_MS }] };

beforeAll(async () => {
  const infra = testInfra();
  stack = await Stack.start({ natsUrl: infra.natsUrl, mongoUrl: infra.mongoUrl, policyFiles: { "quotas.json": JSON.stringify(QUOTAS) } });
  nc = await connect({ servers: infra.natsUrl });
  mongo = await new MongoClient(infra.mongoUrl).connect();
});

afterAll(async () => {
  await nc?.close();
  await stack?.stop();
  await mongo?.db(`${stack.name}_runtime`).dropDatabase();
  await mongo?.db(`${stack.name}_tools`).dropDatabase();
  await mongo?.close();
});

type Event = AuditedEvent["event"] & { principal?: unknown };

/** Submits one tool call as a host with its own loop, in a new run on `taskId` (or in `runId`); waits for its result. */
async function call(
  name: string,
  args: unknown,
  options: { user?: keyof typeof STACK_USERS; credential?: string; taskId?: string; runId?: string; extra?: Record<string, unknown> } = {},
): Promise<{ runId: string; callId: string; result: CallResult; events: Event[] }> {
  const body = {
    ...(options.runId ? { run_id: options.runId } : { context: { task_id: options.taskId ?? "task_auth" } }),
    calls: [{ id: "host_1", name, arguments: typeof args === "string" ? args : JSON.stringify(args) }],
    wait_ms: 30_000,
    ...options.extra,
  };
  const response = options.credential
    ? await stack.apiWith<{ run_id: string; results: { call_id: string; result?: CallResult }[] }>(options.credential, "POST", "/v1/tool-calls", body)
    : await stack.api<{ run_id: string; results: { call_id: string; result?: CallResult }[] }>("POST", "/v1/tool-calls", body, options.user ?? "alice");
  expect(response.status).toBe(200);
  const [r] = response.body.results;
  const events = (await waitForCallEvents(stack, r!.call_id, (es) => es.some((e) => e.type === "result_attached"))) as Event[];
  return { runId: response.body.run_id, callId: r!.call_id, result: r!.result!, events };
}

const save = (taskId: string, claim = "Sessions persist state between runs.") => ({
  task_id: taskId,
  claim,
  source_url: "https://example.test/docs/openai-agents-sdk/sessions",
});
const search = { query: "agent state management", source_type: "official", limit: 2 };
const evidence = (filter: Record<string, unknown>) => mongo.db(`${stack.name}_tools`).collection("evidence").countDocuments(filter);
const typesOf = (events: Event[]) => events.map((e) => e.type);

describe("trusted identity", () => {
  it("a model-supplied user_id or tenant_id changes nothing: it is data, refused by the contract, and the call keeps its caller", async () => {
    // bob has no rights; the model names alice and her tenant in the arguments.
    const asBob = await call("save_evidence", { ...save("task_auth"), user_id: "alice", tenant_id: "acme" }, { user: "bob" });
    expect(asBob.result).toMatchObject({ ok: false, error: { code: "INVALID_ARGUMENTS" } });
    expect((asBob.result.error!.details!.violations as { pointer: string }[]).map((v) => v.pointer).sort()).toEqual(["/tenant_id", "/user_id"]);
    expect(typesOf(asBob.events)).toEqual(["proposed", "rejected", "result_attached"]);
    for (const e of asBob.events) expect(e.principal).toEqual({ tenant: "acme", subject: "bob", roles: [] });

    // Without the extra fields bob is denied at tool level, whatever the host body claims about him.
    const claimed = await call("search_sources", search, { user: "bob", extra: { user_id: "alice", tenant_id: "acme", principal: { subject: "alice" } } });
    expect(claimed.result).toMatchObject({ ok: false, error: { code: "PERMISSION_DENIED", message: "you are not allowed to use search_sources" } });
    for (const e of claimed.events) expect(e.principal).toEqual({ tenant: "acme", subject: "bob", roles: [] });

    // alice, allowed, cannot act as another tenant either: the authorized decision names her, not the arguments.
    const asAlice = await call("save_evidence", { ...save("task_auth"), tenant_id: "globex" });
    expect(asAlice.result).toMatchObject({ ok: false, error: { code: "INVALID_ARGUMENTS" } });
    const legit = await call("save_evidence", save("task_auth"), { extra: { tenant_id: "globex" } });
    expect(legit.result.ok).toBe(true);
    const authorized = legit.events.find((e) => e.type === "authorized")!;
    expect((authorized.payload.decision as Decision).principal).toEqual({ tenant: "acme", subject: "alice", roles: ["researcher"] });
    expect(authorized.principal).toEqual({ tenant: "acme", subject: "alice", roles: ["researcher"] });
  });
});

describe("Cedar authorization", () => {
  it("denies a principal without the right at tool level, read tools included, with reasons and the policy version", async () => {
    const denied = await call("search_sources", search, { user: "bob" });
    expect(typesOf(denied.events)).toEqual(["proposed", "denied", "result_attached"]);
    const event = denied.events.find((e) => e.type === "denied")!;
    expect(event.payload.reasons).toEqual(["call search_sources: no policy permits it (deny by default)"]);
    expect(event.payload.policy_version).toMatch(/^cedar-[0-9a-f]{12}$/);
  });

  it("denies another task's id at resource level exactly as it denies a task that does not exist, and writes nothing", async () => {
    const listed = await call("save_evidence", save("task_acme_board"), { taskId: "task_auth" });
    const missing = await call("save_evidence", save("task_never_created"), { taskId: "task_auth" });
    const strip = (r: CallResult) => ({ ...r, call_id: undefined });
    expect(strip(listed.result)).toEqual(strip(missing.result));
    expect(listed.result).toMatchObject({
      ok: false,
      error: { code: "PERMISSION_DENIED", message: "you are not allowed to use save_evidence on the task named at /task_id" },
    });
    const reasons = (c: { events: Event[] }) => c.events.find((e) => e.type === "denied")!.payload.reasons;
    expect(reasons(listed)).toEqual(reasons(missing));
    expect(reasons(listed)).toEqual(["write task at /task_id: no policy permits it (deny by default)"]);
    expect(await evidence({ task_id: { $in: ["task_acme_board", "task_never_created"] } })).toBe(0);
    // The task of the caller's own run is allowed, and the decision records why.
    const own = await call("save_evidence", save("task_auth_own"), { taskId: "task_auth_own" });
    expect(own.result.ok).toBe(true);
  });

  it("reloads policies without a restart, and keeps the previous set when an edit is bad", async () => {
    const policy = stack.process("policy");
    const reloads = () => policy.logs().filter((l) => l.msg === "policy reloaded").length;
    const failures = () => policy.logs().filter((l) => l.msg === "policy reload failed; keeping the previous policy").length;
    const before = await call("search_sources", search, { user: "bob" });
    const oldVersion = before.events.find((e) => e.type === "denied")!.payload.policy_version;

    const granted = reloads();
    writeFileSync(
      join(stack.policyDir, "bob-searches.cedar"),
      '@id("bob-may-search")\npermit (principal == User::"acme/bob", action == Action::"call", resource == Tool::"search_sources");\n',
    );
    await waitFor(() => reloads() > granted, { description: "policy reloading the new file" });
    const allowed = await call("search_sources", search, { user: "bob" });
    expect(allowed.result.ok).toBe(true);
    const decision = allowed.events.find((e) => e.type === "authorized")!.payload.decision as Decision;
    expect(decision.policy_version).not.toBe(oldVersion);

    const failed = failures();
    writeFileSync(join(stack.policyDir, "broken.cedar"), "permit (principal, action, resource"); // a syntax error
    await waitFor(() => failures() > failed, { description: "policy refusing the broken file" });
    expect((await call("search_sources", search, { user: "bob" })).result.ok).toBe(true);

    const fixed = reloads();
    rmSync(join(stack.policyDir, "broken.cedar"));
    rmSync(join(stack.policyDir, "bob-searches.cedar"));
    await waitFor(() => reloads() > fixed, { description: "policy reloading without the grant" });
    const again = await call("search_sources", search, { user: "bob" });
    expect(again.result).toMatchObject({ ok: false, error: { code: "PERMISSION_DENIED" } });
    expect(again.events.find((e) => e.type === "denied")!.payload.policy_version).toBe(oldVersion);
  });
});

describe("quotas", () => {
  it("returns RATE_LIMITED with a retry-after once a principal used up its calls of a tool, and counts each principal apart", async () => {
    const url = "https://example.test/docs/openai-agents-sdk/sessions";
    // Windows are fixed: three calls across a window's end would count as two and one. Within a minute of one,
    // the test starts in the next (the policy service reads the same clock).
    const untilNextWindow = QUOTA_WINDOW_MS - (Date.now() % QUOTA_WINDOW_MS);
    if (untilNextWindow < 60_000) {
      await waitFor(() => Date.now() % QUOTA_WINDOW_MS < QUOTA_WINDOW_MS / 2, {
        timeoutMs: untilNextWindow + 5_000,
        intervalMs: 250,
        description: "the next quota window",
      });
    }
    const first = await call("fetch_document", { url });
    const second = await call("fetch_document", { url });
    const third = await call("fetch_document", { url });
    expect([first.result.ok, second.result.ok]).toEqual([true, true]);
    expect(third.result).toMatchObject({ ok: false, error: { code: "RATE_LIMITED" }, retryable: true });
    const retryAfter = third.result.error!.details!.retry_after_ms as number;
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(QUOTA_WINDOW_MS);
    expect(typesOf(third.events)).toEqual(["proposed", "denied", "result_attached"]);
    expect(third.events.find((e) => e.type === "denied")!.payload.reasons).toEqual([
      `quota fetch-test: 2 calls of fetch_document per ${QUOTA_WINDOW_MS} ms for acme/alice used up`,
    ]);
    // Another researcher has a quota of its own.
    const erin = await stack.jwt({ sub: "erin", roles: ["researcher"] });
    expect((await call("fetch_document", { url }, { credential: erin })).result.ok).toBe(true);
  });
});

describe("signed decisions", () => {
  const principal = { tenant: "acme", subject: "alice", roles: ["researcher"] };

  /** An `authorized` event for a new call, its decision signed by `signer`, then (optionally) altered. */
  function authorizedEvent(args: Record<string, unknown>, signer: DecisionSigner, alter: (d: Decision) => Decision = (d) => d) {
    const callId = newCallId();
    const runId = newRunId();
    const tool = { name: "save_evidence", version: "1.0.0", hash: `sha256:${"0".repeat(64)}` };
    const decision: Decision = {
      decision_id: `dec_${callId.slice(5)}`,
      call_id: callId,
      run_id: runId,
      tool,
      args_hash: canonicalHash(args),
      principal,
      context: { task_id: "task_forged" },
      policy_version: "forged",
      issued_at: new Date().toISOString(),
      expires_at: new Date(Date.now() + 60_000).toISOString(),
      key_id: signer.keyId,
    };
    const event = {
      v: 1,
      kind: "call",
      id: eventId(callId, "authorized", 1),
      type: "authorized",
      call_id: callId,
      run_id: runId,
      seq: 2,
      attempt: 1,
      time: new Date().toISOString(),
      source: "policy",
      principal,
      tool,
      args_hash: decision.args_hash,
      payload: { decision: alter(decision), signature: signer.sign(decision), arguments: args },
    };
    return { callId, event };
  }

  // The second line behind the event signature: a process that holds policy's event key but not its decision key.
  it("refuses an authorization whose decision is forged (another key, other arguments, another call), audits the refusal and runs nothing", async () => {
    const args = save("task_forged", "forged claim");
    const mallory = generateKeyPairSync("ed25519");
    const otherKey = decisionSigner(mallory.privateKey.export({ type: "pkcs8", format: "pem" }).toString());
    const cases = [
      { expect: "unknown_key", ...authorizedEvent(args, otherKey) },
      { expect: "bad_signature", ...authorizedEvent(args, stack.policySigner, (d) => ({ ...d, context: { task_id: "task_other" } })) },
    ];
    const unbound = authorizedEvent(args, stack.policySigner);
    unbound.event.payload.arguments = { ...args, claim: "something else" };
    cases.push({ expect: "arguments_not_bound", ...unbound });
    for (const c of cases) await stack.publishEvent(nc, `${stack.name}.call.${c.callId}.authorized`, JSON.stringify(c.event), { as: "policy" });
    for (const c of cases) {
      const events = await waitForCallEvents(stack, c.callId, (es) => es.some((e) => e.type === "completed"), { description: `the refusal of ${c.expect}` });
      expect(events.map((e) => e.type)).toEqual(["authorized", "refused", "completed"]);
      expect(events[1]!.payload.reason).toBe(c.expect);
      expect(events[2]!.payload.result).toMatchObject({ ok: false, error: { code: "PERMISSION_DENIED" } });
    }
    expect(await evidence({ task_id: "task_forged" })).toBe(0);
  });
});
