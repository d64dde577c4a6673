import { describe, expect, it } from "vitest";
import type { ToolContractInput } from "./contract.js";
import { ContractCompiler, ContractError, ToolRegistry } from "./registry.js";
import { effectHints, REDACTED, resourceKeys, type KeyFacts } from "./tool-semantics.js";

const base: ToolContractInput = {
  name: "create_ticket",
  version: "1.0.0",
  description: "Creates a ticket. Use when asked to file an issue; do not use to search tickets.",
  owner: "test",
  input_schema: { type: "object", additionalProperties: true },
  output_schema: { type: "object", additionalProperties: true },
  side_effect: "write",
  risk: "medium",
  timeout_ms: 1_000,
  idempotency: { kind: "keyed" },
};
const compile = (over: Partial<ToolContractInput> = {}) => new ContractCompiler().compile({ ...base, ...over });

const facts: KeyFacts = { run_id: "run_1", call_id: "call_1", tenant: "acme", subject: "alice", task_id: "task_1", args_hash: "sha256:ab" };

describe("a compiled tool", () => {
  it("says whether it writes, once for every service", () => {
    expect(compile({ side_effect: "write" }).writes).toBe(true);
    expect(compile({ side_effect: "external" }).writes).toBe(true);
    expect(compile({ side_effect: "read" }).writes).toBe(false);
    expect(compile({ side_effect: "none" }).writes).toBe(false);
    expect(compile({ untrusted_output: true }).untrustedOutput).toBe(true);
  });

  it("names resources by canonical id: a string as given, any other value in RFC 8785 form, null when absent", () => {
    const tool = compile({
      resources: [
        { type: "task", pointer: "/task_id" },
        { type: "account", pointer: "/account" },
        { type: "doc", pointer: "/missing" },
      ],
    });
    const resources = tool.resources({ task_id: "task_7", account: { region: "eu", n: 1.0 } });
    expect(resources).toEqual([
      { type: "task", pointer: "/task_id", id: "task_7" },
      { type: "account", pointer: "/account", id: '{"n":1,"region":"eu"}' },
      { type: "doc", pointer: "/missing", id: null },
    ]);
    expect(resourceKeys(resources)).toEqual(["task:task_7", 'account:{"n":1,"region":"eu"}']);
    expect(tool.resources({ task_id: null, account: "a" })[0]?.id).toBeNull();
  });

  it("keys a call by tool, run and call unless the contract gives a business-key template", () => {
    const tool = compile();
    expect(tool.idempotencyKey(facts, { title: "x" })).toBe("create_ticket:run_1:call_1");
    expect(tool.idempotencyKey({ ...facts, call_id: "call_2" }, { title: "x" })).not.toBe(tool.idempotencyKey(facts, { title: "x" }));
  });

  it("renders a business key from trusted facts and canonical argument values only", () => {
    const tool = compile({ idempotency: { kind: "keyed", key_template: "{tenant}:{task_id}:{args:/title}:{args:/meta}:{args:/absent}" } });
    const key = tool.idempotencyKey(facts, { title: "Disk full", meta: { b: 2, a: 1 }, user_id: "mallory" });
    expect(key).toBe('create_ticket:acme:task_1:"Disk full":{"a":1,"b":2}:null');
    // The same business operation in another call, with its fields in another order, has the same key.
    expect(tool.idempotencyKey({ ...facts, call_id: "call_9", run_id: "run_9" }, { meta: { a: 1, b: 2 }, title: "Disk full" })).toBe(key);
  });

  it("refuses a template it could not render when the contract compiles, not at the first call", () => {
    expect(() => compile({ idempotency: { kind: "keyed", key_template: "{user_id}" } })).toThrow(ContractError);
    expect(() => compile({ idempotency: { kind: "keyed", key_template: "{args:title}" } })).toThrow(/not a JSON pointer/);
    expect(() => compile({ idempotency: { kind: "keyed", key_template: "{tenant" } })).toThrow(/unclosed/);
  });

  it("redacts the arguments and result fields the contract marks sensitive, and says whether it has any", () => {
    const tool = compile({ sensitive: ["/card", "/auth/token"], sensitive_results: ["/receipt/code"] });
    expect(tool.redacts).toEqual({ arguments: true, results: true });
    expect(tool.redactArguments({ card: "4111", auth: { token: "t", user: "u" }, note: "n" })).toEqual({
      card: REDACTED,
      auth: { token: REDACTED, user: "u" },
      note: "n",
    });
    expect(tool.redactResult({ id: "1", receipt: { code: "c0de" } })).toEqual({ id: "1", receipt: { code: REDACTED } });
    expect(compile({ sensitive: [""] }).redactArguments({ anything: 1 })).toEqual({ [REDACTED]: REDACTED });
    expect(compile().redacts).toEqual({ arguments: false, results: false });
  });

  it("keeps the hash a contract had before sensitive_results existed when it does not use them", () => {
    const plain = compile();
    const withField = compile({ sensitive_results: [] });
    expect(withField.hash).toBe(plain.hash);
    expect(compile({ sensitive_results: ["/x"] }).hash).not.toBe(plain.hash);
  });

  it("enforces the closed input schema and shows it", () => {
    const tool = compile({ input_schema: { type: "object", properties: { title: { type: "string" } } } });
    expect(tool.inputSchema).toEqual({ type: "object", properties: { title: { type: "string" } }, unevaluatedProperties: false });
    expect(() => compile({ input_schema: { type: "object", properties: { x: { $ref: "https://example.com/x.json" } } } })).toThrow(
      /cannot refuse unknown fields/,
    );
  });
});

describe("unknown fields", () => {
  it("are refused with INVALID_ARGUMENTS at their own pointer, at any depth, although the schema leaves them open", () => {
    const compiler = new ContractCompiler();
    const tool = compiler.compile({
      ...base,
      input_schema: {
        type: "object",
        properties: { title: { type: "string" }, labels: { type: "array", items: { type: "object", properties: { name: { type: "string" } } } } },
        required: ["title"],
      },
    });
    const registry = ToolRegistry.fromCompiled([tool]);
    expect(registry.checkArguments(tool, '{"title":"t","labels":[{"name":"a"}]}').ok).toBe(true);
    for (const [text, pointer] of [
      ['{"title":"t","force":true}', "/force"],
      ['{"title":"t","labels":[{"name":"a"},{"name":"b","force":true}]}', "/labels/1/force"],
      ['{"title":"t","a/b":1}', "/a~1b"],
    ] as const) {
      const check = registry.checkArguments(tool, text);
      expect(check).toMatchObject({ ok: false, code: "INVALID_ARGUMENTS" });
      expect(!check.ok && check.violations).toContainEqual({ pointer, message: "is not an allowed property", keyword: "unevaluatedProperties" });
    }
  });
});

describe("effect hints", () => {
  const hints = (over: Partial<ToolContractInput> = {}) => effectHints(compile(over).contract);

  it("takes a write for destructive unless its contract says it only adds", () => {
    expect(hints()).toEqual({ readOnly: false, destructive: true, idempotent: false, openWorld: false });
    expect(hints({ write_effect: "destructive" }).destructive).toBe(true);
    expect(hints({ write_effect: "additive" })).toEqual({ readOnly: false, destructive: false, idempotent: false, openWorld: false });
  });

  it("says a read is read-only and idempotent, and open world when it reaches outside or returns outside content", () => {
    expect(hints({ side_effect: "read", risk: "low", idempotency: { kind: "natural" } })).toEqual({
      readOnly: true,
      destructive: false,
      idempotent: true,
      openWorld: false,
    });
    expect(hints({ side_effect: "read", risk: "low", idempotency: { kind: "natural" }, untrusted_output: true }).openWorld).toBe(true);
    expect(hints({ side_effect: "external" })).toMatchObject({ readOnly: false, destructive: true, openWorld: true });
  });

  it("calls a write idempotent when a repeat is the same effect: natural, or keyed by the arguments rather than the call", () => {
    expect(hints({ idempotency: { kind: "natural" } }).idempotent).toBe(true);
    expect(hints({ idempotency: { kind: "keyed", key_template: "{tenant}:{args:/title}" } }).idempotent).toBe(true);
    expect(hints({ idempotency: { kind: "keyed", key_template: "{call_id}:{args:/title}" } }).idempotent).toBe(false);
    expect(hints({ idempotency: { kind: "keyed" } }).idempotent).toBe(false);
  });
});
