import { newCallId, newRunId, type JsonValue } from "@toolgate/contracts";
import { ToolRegistry, type ToolContext, type ToolDefinition, type ToolHandler, type ToolOutcome } from "@toolgate/registry";
import { describe, expect, it } from "vitest";
import {
  evidenceId,
  researchContracts,
  researchTools,
  type EvidenceRecord,
  type EvidenceStore,
  type NewEvidence,
  type ResearchToolsOptions,
  type SaveEvidenceResult,
} from "./index.js";

const C04_QUERY = "OpenAI Agents SDK state management official documentation";
const LONG_DOC = "https://example.test/docs/json-schema/2020-12/keyword-reference";
const SESSIONS_DOC = "https://example.test/docs/openai-agents-sdk/sessions";

/** In-memory stand-in for unit tests; the dedup guarantee itself is tested against the real server. */
class MemoryEvidenceStore implements EvidenceStore {
  readonly records = new Map<string, EvidenceRecord>();
  saves: NewEvidence[] = [];
  /** When set, save() waits on this promise before storing (to hold a save in flight). */
  gate: Promise<void> | undefined;

  async save(evidence: NewEvidence): Promise<SaveEvidenceResult> {
    this.saves.push(evidence);
    if (this.gate !== undefined) await this.gate;
    const id = evidenceId(evidence.taskId, evidence.idempotencyKey);
    const existing = this.records.get(id);
    if (existing !== undefined) return { record: existing, created: false };
    const { quote, ...rest } = evidence;
    const record: EvidenceRecord = { ...rest, ...(quote === undefined ? {} : { quote }), evidenceId: id, createdAt: new Date() };
    this.records.set(id, record);
    return { record, created: true };
  }

  async listByTask(taskId: string): Promise<EvidenceRecord[]> {
    return [...this.records.values()].filter((r) => r.taskId === taskId);
  }

  async ensureIndexes(): Promise<void> {}
}

function toolContext(overrides: Partial<ToolContext> = {}): ToolContext {
  return {
    callId: newCallId(),
    runId: newRunId(),
    principal: { tenant: "acme", subject: "analyst-1", roles: ["researcher"] },
    context: { task_id: "task_c04" },
    idempotencyKey: "idem-0001",
    signal: new AbortController().signal,
    ...overrides,
  };
}

function tools(options: Partial<ResearchToolsOptions> = {}): { handler(name: string): ToolHandler; store: MemoryEvidenceStore } {
  const store = new MemoryEvidenceStore();
  const definitions: ToolDefinition[] = researchTools({ evidence: store, ...options });
  return {
    store,
    handler(name) {
      const definition = definitions.find((d) => d.contract.name === name);
      if (definition === undefined) throw new Error(`no tool ${name}`);
      return definition.handler;
    },
  };
}

function data(outcome: ToolOutcome): Record<string, JsonValue> {
  if (outcome.ok !== true) throw new Error(`expected success, got ${JSON.stringify(outcome)}`);
  return outcome.data as Record<string, JsonValue>;
}

describe("researchTools", () => {
  it("defines the three C04 tools in contract order", () => {
    const { store } = tools();
    const names = researchTools({ evidence: store }).map((t) => t.contract.name);
    expect(names).toEqual(["search_sources", "fetch_document", "save_evidence"]);
    expect(researchContracts.map((c) => c.name)).toEqual(names);
  });

  it("refuses a fetch limit outside what the contract allows, and bad fault patterns", () => {
    const store = new MemoryEvidenceStore();
    expect(() => researchTools({ evidence: store, fetchMaxChars: 0 })).toThrow(RangeError);
    expect(() => researchTools({ evidence: store, fetchMaxChars: 20_001 })).toThrow(RangeError);
    expect(() => researchTools({ evidence: store, faults: { slowSearch: { pattern: "(", delayMs: 10 } } })).toThrow(SyntaxError);
  });
});

describe("search_sources", () => {
  it("answers the C04 query with official items, an OpenAI Agents SDK sessions/state page first", async () => {
    const outcome = await tools().handler("search_sources")({ query: C04_QUERY, source_type: "official", limit: 3 }, toolContext());
    const items = data(outcome).items as { title: string; url: string; source_type: string; snippet: string }[];
    expect(items).toHaveLength(3);
    expect(items.every((i) => i.source_type === "official")).toBe(true);
    expect(items[0]?.url).toMatch(/\/openai-agents-sdk\/(sessions|state-management)$/);
    expect(Object.keys(items[0] ?? {}).sort()).toEqual(["snippet", "source_type", "title", "url"]);
  });

  it("returns an empty list when nothing matches", async () => {
    const outcome = await tools().handler("search_sources")({ query: "zebra quasar marmalade", source_type: "any", limit: 10 }, toolContext());
    expect(data(outcome)).toEqual({ items: [] });
  });

  it("returns promptly with TIMEOUT when the signal aborts during a slow-search fault", async () => {
    const search = tools({ faults: { slowSearch: { pattern: "state\\s+management", delayMs: 600_000 } } }).handler("search_sources");
    const controller = new AbortController();
    const pending = search({ query: `OpenAI Agents SDK STATE management`, source_type: "official", limit: 3 }, toolContext({ signal: controller.signal }));
    controller.abort(new Error("contract timeout"));
    const outcome = await pending;
    expect(outcome).toMatchObject({ ok: false, code: "TIMEOUT", retryable: true });
  });

  it("answers a matching query once the configured delay has elapsed", async () => {
    const search = tools({ faults: { slowSearch: { pattern: "^slow", delayMs: 1 } } }).handler("search_sources");
    const outcome = await search({ query: "slow LangGraph checkpointers", source_type: "any", limit: 1 }, toolContext());
    expect((data(outcome).items as unknown[]).length).toBe(1);
  });

  it("leaves queries that do not match the fault pattern undelayed", async () => {
    // With a ten-minute delay, a non-matching query that waited would fail this test on its timeout.
    const search = tools({ faults: { slowSearch: { pattern: "^slow", delayMs: 600_000 } } }).handler("search_sources");
    const outcome = await search({ query: "LangGraph checkpointers", source_type: "any", limit: 1 }, toolContext());
    expect((data(outcome).items as unknown[]).length).toBe(1);
  });

  it("does not search once the signal has aborted", async () => {
    const controller = new AbortController();
    controller.abort();
    const outcome = await tools().handler("search_sources")({ query: C04_QUERY, source_type: "any", limit: 3 }, toolContext({ signal: controller.signal }));
    expect(outcome).toMatchObject({ ok: false, code: "TIMEOUT" });
  });
});

describe("fetch_document", () => {
  it("returns the normalized full text of a short document", async () => {
    const outcome = await tools().handler("fetch_document")({ url: SESSIONS_DOC }, toolContext());
    const result = data(outcome);
    expect(result.title).toBe("OpenAI Agents SDK: Sessions");
    expect(result.truncated).toBe(false);
    expect(result.chars).toBe((result.text as string).length);
    expect(result.text).toContain("Sessions provide a persistent memory layer");
    expect(result.text).not.toMatch(/^#|```|`/m);
  });

  it("truncates the long reference page at 20,000 characters and flags it", async () => {
    const outcome = await tools().handler("fetch_document")({ url: LONG_DOC }, toolContext());
    const result = data(outcome);
    expect(result.truncated).toBe(true);
    expect(outcome).toMatchObject({ ok: true, truncated: true });
    expect(result.chars).toBe((result.text as string).length);
    expect(result.chars).toBeGreaterThan(19_900);
    expect(result.chars).toBeLessThanOrEqual(20_000);
  });

  it("honours a lower configured maximum", async () => {
    const outcome = await tools({ fetchMaxChars: 500 }).handler("fetch_document")({ url: SESSIONS_DOC }, toolContext());
    const result = data(outcome);
    expect(result.truncated).toBe(true);
    expect((result.text as string).length).toBeLessThanOrEqual(500);
  });

  it("reports an unknown URL as OBJECT_NOT_FOUND without echoing it or internals", async () => {
    const url = "https://example.test/secret/../../etc/passwd";
    const outcome = await tools().handler("fetch_document")({ url }, toolContext());
    expect(outcome).toMatchObject({ ok: false, code: "OBJECT_NOT_FOUND", retryable: false });
    if (outcome.ok) return;
    expect(outcome.message).not.toContain("example.test");
    expect(outcome.message).not.toMatch(/corpus|\/work|\.md|dist/);
  });
});

describe("save_evidence", () => {
  const args = {
    task_id: "task_c04",
    claim: "Sessions persist conversation history.",
    source_url: SESSIONS_DOC,
    quote: "Sessions provide a persistent memory layer",
  };

  it("refuses another task's id without touching the store", async () => {
    const { handler, store } = tools();
    const outcome = await handler("save_evidence")({ ...args, task_id: "archive-2019" }, toolContext());
    expect(outcome).toEqual({ ok: false, code: "PERMISSION_DENIED", message: "evidence can only be saved to the current task", retryable: false });
    expect(store.saves).toEqual([]);
  });

  it("refuses when the run has no task at all", async () => {
    const { handler, store } = tools();
    const outcome = await handler("save_evidence")(args, toolContext({ context: {} }));
    expect(outcome).toMatchObject({ ok: false, code: "PERMISSION_DENIED" });
    expect(store.saves).toEqual([]);
  });

  it("saves with the runtime's idempotency key and replays on the same key", async () => {
    const { handler, store } = tools();
    const ctx = toolContext({ idempotencyKey: "idem-42" });
    const first = data(await handler("save_evidence")(args, ctx));
    expect(first).toEqual({ evidence_id: evidenceId("task_c04", "idem-42"), stored: true });
    expect(store.saves[0]).toEqual({ taskId: "task_c04", claim: args.claim, sourceUrl: SESSIONS_DOC, quote: args.quote, idempotencyKey: "idem-42" });
    const replay = data(await handler("save_evidence")(args, ctx));
    expect(replay).toEqual({ evidence_id: first.evidence_id, stored: false });
    expect(store.records.size).toBe(1);
  });

  it("reports IDEMPOTENCY_CONFLICT when a key is replayed with different evidence", async () => {
    const { handler } = tools();
    const ctx = toolContext({ idempotencyKey: "idem-7" });
    await handler("save_evidence")(args, ctx);
    const outcome = await handler("save_evidence")({ ...args, claim: "Something else entirely." }, ctx);
    expect(outcome).toMatchObject({ ok: false, code: "IDEMPOTENCY_CONFLICT" });
  });

  it("returns OUTCOME_UNKNOWN promptly when aborted while the save is in flight", async () => {
    const { handler, store } = tools();
    let release: () => void = () => undefined;
    store.gate = new Promise((resolve) => (release = resolve));
    const controller = new AbortController();
    const pending = handler("save_evidence")(args, toolContext({ signal: controller.signal }));
    controller.abort();
    expect(await pending).toMatchObject({ ok: false, code: "OUTCOME_UNKNOWN", retryable: false });
    expect(store.saves).toHaveLength(1);
    release();
  });

  it("does not start a save once the signal has aborted", async () => {
    const { handler, store } = tools();
    const controller = new AbortController();
    controller.abort();
    expect(await handler("save_evidence")(args, toolContext({ signal: controller.signal }))).toMatchObject({ ok: false, code: "TIMEOUT" });
    expect(store.saves).toEqual([]);
  });
});

describe("contracts under the registry", () => {
  const registry = ToolRegistry.from(researchContracts);
  const tool = (name: string) => {
    const compiled = registry.get(name);
    if (compiled === undefined) throw new Error(`${name} is not registered`);
    return compiled;
  };

  it("compile in strict mode with the declared runtime properties", () => {
    expect(registry.list().map((t) => [t.ref.name, t.ref.version])).toEqual([
      ["search_sources", "1.0.0"],
      ["fetch_document", "1.0.0"],
      ["save_evidence", "1.1.0"],
    ]);
    // Saving evidence only adds records: not destructive, as far as an MCP host is told.
    expect(tool("save_evidence").contract).toMatchObject({ side_effect: "write", write_effect: "additive" });
    expect(tool("search_sources").contract).toMatchObject({
      side_effect: "read",
      risk: "low",
      timeout_ms: 2000,
      untrusted_output: true,
      idempotency: { kind: "natural" },
      retry: { max_attempts: 2 },
    });
    expect(tool("fetch_document").contract).toMatchObject({
      side_effect: "read",
      risk: "low",
      timeout_ms: 3000,
      untrusted_output: true,
      limits: { max_result_bytes: 128 * 1024 },
    });
    expect(tool("save_evidence").contract).toMatchObject({
      side_effect: "write",
      risk: "medium",
      approval: "when_tainted",
      idempotency: { kind: "keyed" },
      resources: [{ type: "task", pointer: "/task_id" }],
      owner: "research-platform",
    });
  });

  it("accept the C04 arguments and reject unknown, missing or out-of-range ones", () => {
    expect(registry.checkArguments(tool("search_sources"), JSON.stringify({ query: C04_QUERY, source_type: "official", limit: 3 })).ok).toBe(true);
    const bad = [
      { query: C04_QUERY, source_type: "official", limit: 3, extra: true },
      { query: C04_QUERY, source_type: "docs", limit: 3 },
      { query: C04_QUERY, source_type: "official", limit: 11 },
      { query: C04_QUERY, source_type: "official", limit: "3" },
      { query: "ab", source_type: "any", limit: 1 },
      { query: C04_QUERY, source_type: "official" },
    ];
    for (const args of bad)
      expect(registry.checkArguments(tool("search_sources"), JSON.stringify(args))).toMatchObject({ ok: false, code: "INVALID_ARGUMENTS" });
    expect(registry.checkArguments(tool("fetch_document"), JSON.stringify({ url: "not a uri" })).ok).toBe(false);
    expect(registry.checkArguments(tool("save_evidence"), JSON.stringify({ task_id: "task c04", claim: "x", source_url: SESSIONS_DOC })).ok).toBe(false);
    expect(registry.checkArguments(tool("save_evidence"), JSON.stringify({ task_id: "task_c04", claim: "", source_url: SESSIONS_DOC })).ok).toBe(false);
    expect(registry.checkArguments(tool("save_evidence"), JSON.stringify({ task_id: "task_c04", claim: "x", source_url: SESSIONS_DOC })).ok).toBe(true);
  });

  it("validate every tool's real output, including the longest fetch and a full page of hits", async () => {
    const { handler } = tools();
    const outputs: [string, ToolOutcome][] = [
      ["search_sources", await handler("search_sources")({ query: C04_QUERY, source_type: "any", limit: 10 }, toolContext())],
      ["search_sources", await handler("search_sources")({ query: "zebra quasar", source_type: "any", limit: 10 }, toolContext())],
      ["fetch_document", await handler("fetch_document")({ url: LONG_DOC }, toolContext())],
      ["fetch_document", await handler("fetch_document")({ url: "https://example.test/blog/state-management-patterns-for-llm-agents" }, toolContext())],
      ["save_evidence", await handler("save_evidence")({ task_id: "task_c04", claim: "c", source_url: SESSIONS_DOC }, toolContext())],
    ];
    expect((data(outputs[0]![1]).items as unknown[]).length).toBe(10);
    for (const [name, outcome] of outputs) {
      expect(registry.checkResult(tool(name), data(outcome))).toMatchObject({ ok: true });
    }
  });

  it("reject outputs that leak extra fields (the output schemas are closed)", async () => {
    const { handler } = tools();
    const fetched = data(await handler("fetch_document")({ url: SESSIONS_DOC }, toolContext()));
    expect(registry.checkResult(tool("fetch_document"), { ...fetched, path: "/srv/corpus/x.md" })).toMatchObject({ ok: false, code: "INVALID_TOOL_RESULT" });
    expect(registry.checkResult(tool("save_evidence"), { evidence_id: "ev_123", stored: true })).toMatchObject({ ok: false, code: "INVALID_TOOL_RESULT" });
  });
});
