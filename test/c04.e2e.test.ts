import { Stack, testInfra, type AuditedEvent } from "@toolgate/testkit";
import { MongoClient } from "mongodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// The C04 case of seed 000 through the four real services, started as separate processes.
const TASK = "task_c04";
const INPUT = `Research task task_id=${TASK}: find official documentation on OpenAI Agents SDK state management and save one claim.`;

let stack: Stack;
let mongo: MongoClient;

beforeAll(async () => {
  const infra = testInfra();
  stack = await Stack.start({
    natsUrl: infra.natsUrl,
    mongoUrl: infra.mongoUrl,
    env: { executor: { EXECUTOR_FAULTS: JSON.stringify({ slowSearch: { pattern: "slow backend", delayMs: 5_000 } }) } },
  });
  mongo = await new MongoClient(infra.mongoUrl).connect();
});

afterAll(async () => {
  await stack?.stop();
  await mongo?.db(`${stack.name}_runtime`).dropDatabase();
  await mongo?.db(`${stack.name}_tools`).dropDatabase();
  await mongo?.close();
});

/** Event types per call id, in audit order. */
function byCall(trace: AuditedEvent[]): Map<string, { tool: string | undefined; types: string[]; events: AuditedEvent["event"][] }> {
  const calls = new Map<string, { tool: string | undefined; types: string[]; events: AuditedEvent["event"][] }>();
  for (const { event } of trace) {
    if (event.kind !== "call") continue;
    const entry = calls.get(event.call_id!) ?? { tool: undefined, types: [], events: [] };
    entry.tool ??= event.type === "proposed" ? (event.payload.tool_name as string) : event.tool?.name;
    entry.types.push(event.type);
    entry.events.push(event);
    calls.set(event.call_id!, entry);
  }
  return calls;
}

describe("C04 research agent", () => {
  it("searches, fetches and saves evidence, each call ending once under its own call id", async () => {
    const run = await stack.runToEnd("scripted:c04", INPUT, { task_id: TASK });
    expect(run.status).toBe("completed");
    expect(run.calls.map((c) => [c.provider_call_id, c.tool, c.status])).toEqual([
      ["call_01", "search_sources", "completed"],
      ["call_02", "fetch_document", "completed"],
      ["call_03", "save_evidence", "completed"],
    ]);

    const trace = await stack.trace(run.run_id);
    const calls = [...byCall(trace).values()];
    expect(calls.map((c) => c.tool)).toEqual(["search_sources", "fetch_document", "save_evidence"]);
    for (const call of calls) expect(call.types).toEqual(["proposed", "authorized", "started", "completed", "result_attached"]);
    // The envelope names the contract and the normalized arguments from policy's decision on (the README's rule):
    // `proposed` comes before either exists, and carries the tool's name and the raw arguments in its payload.
    for (const call of calls) {
      const [proposed, ...decided] = call.events;
      expect([proposed!.tool, proposed!.args_hash]).toEqual([undefined, undefined]);
      const authorized = decided[0]!;
      expect(authorized.tool).toMatchObject({ name: call.tool, version: expect.any(String), hash: expect.stringMatching(/^sha256:/) });
      expect(authorized.args_hash).toMatch(/^sha256:[0-9a-f]{64}$/);
      for (const event of decided) expect([event.type, event.tool, event.args_hash]).toEqual([event.type, authorized.tool, authorized.args_hash]);
    }

    const [search, fetch, save] = calls.map(
      (c) => c.events.find((e) => e.type === "completed")!.payload.result as { ok: boolean; data: Record<string, unknown> },
    );
    expect(search!.ok).toBe(true);
    const items = search!.data.items as { url: string; source_type: string }[];
    expect(items.length).toBeGreaterThan(0);
    expect(items.every((i) => i.source_type === "official")).toBe(true);
    expect(fetch!.data.url).toBe(items[0]!.url);
    expect(fetch!.data.truncated).toBe(false);
    expect(save!.data.stored).toBe(true);

    // The side effect is real and in the current task's evidence.
    const evidence = await mongo.db(`${stack.name}_tools`).collection("evidence").find({ task_id: TASK }).toArray();
    expect(evidence.map((e) => e._id)).toEqual([save!.data.evidence_id]);
    expect(run.final_text).toContain(String(save!.data.evidence_id));

    const verified = await stack.audit<{ ok: boolean }>(`/v1/runs/${run.run_id}/verify`);
    expect(verified.body.ok).toBe(true);

    // Rule of Two: once untrusted content came back, later proposals say the run is tainted, and by what.
    const taints = calls.map((c) => c.events.find((e) => e.type === "proposed")!.payload.taint);
    expect(taints).toEqual([
      { tainted: false, sources: [] },
      { tainted: true, sources: ["search_sources"] },
      { tainted: true, sources: ["fetch_document", "search_sources"] },
    ]);
  });

  it("refuses limit 50 with INVALID_ARGUMENTS at /limit, and the tool never runs", async () => {
    const run = await stack.runToEnd("scripted:c04-invalid-limit", INPUT, { task_id: TASK });
    const [call] = [...byCall(await stack.trace(run.run_id)).values()];
    expect(call!.types).toEqual(["proposed", "rejected", "result_attached"]);
    // Refused before any contract accepted its arguments: no event of it names a contract or an argument hash.
    for (const event of call!.events) expect([event.type, event.tool, event.args_hash]).toEqual([event.type, undefined, undefined]);
    const result = call!.events[1]!.payload.result as { error: { code: string; details: { violations: { pointer: string }[] } }; retryable: boolean };
    expect(result.error.code).toBe("INVALID_ARGUMENTS");
    expect(result.error.details.violations.map((v) => v.pointer)).toEqual(["/limit"]);
    expect(result.retryable).toBe(false);
    expect(run.calls[0]!.result!.ok).toBe(false);
  });

  it("reports a backend timeout of the read-only search as TIMEOUT, retryable", async () => {
    const run = await stack.runToEnd("scripted:c04-timeout", INPUT, { task_id: TASK });
    const [call] = [...byCall(await stack.trace(run.run_id)).values()];
    // search_sources allows two attempts and a read's TIMEOUT is retryable: the executor tries once more.
    expect(call!.types).toEqual(["proposed", "authorized", "started", "retry_scheduled", "started", "completed", "result_attached"]);
    const completed = call!.events.find((e) => e.type === "completed")!;
    const result = completed.payload.result as { ok: boolean; error: { code: string }; retryable: boolean };
    expect(result).toMatchObject({ ok: false, error: { code: "TIMEOUT" }, retryable: true });
    // The contract's 2 s timeout ended it, not the 5 s backend.
    expect(completed.payload.duration_ms).toBeGreaterThanOrEqual(2_000);
    expect(completed.payload.duration_ms).toBeLessThan(4_000);
  });

  it("returns a search with no match as success with items: []", async () => {
    const run = await stack.runToEnd("scripted:c04-no-match", INPUT, { task_id: TASK });
    const [call] = [...byCall(await stack.trace(run.run_id)).values()];
    const result = call!.events.find((e) => e.type === "completed")!.payload.result;
    expect(result).toMatchObject({ ok: true, data: { items: [] } });
    expect(run.final_text).toContain("items: []");
  });

  it("refuses to save evidence into another task and writes nothing there", async () => {
    const run = await stack.runToEnd("scripted:c04-other-task", INPUT, { task_id: TASK });
    const save = run.calls.find((c) => c.tool === "save_evidence")!;
    expect(save.result).toMatchObject({ ok: false, error: { code: "PERMISSION_DENIED" } });
    const written = await mongo.db(`${stack.name}_tools`).collection("evidence").countDocuments({ task_id: "task_someone_else" });
    expect(written).toBe(0);
  });
});
