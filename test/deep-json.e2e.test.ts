/**
 * Deep and wide JSON on every HTTP endpoint of the real services: each answers a typed 4xx (INVALID_JSON for
 * nesting deeper than any contract admits) or accepts the call and ends it with a typed terminal outcome — never
 * a 500, and never without a log line saying why.
 */
import { MAX_REQUEST_DEPTH } from "@toolgate/contracts";
import { Stack, resultOf, testInfra, waitFor, type CallResult } from "@toolgate/testkit";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

let stack: Stack;

beforeAll(async () => {
  const infra = testInfra();
  stack = await Stack.start({ natsUrl: infra.natsUrl, mongoUrl: infra.mongoUrl });
});

afterAll(async () => {
  await stack?.stop();
});

type Shape = "array" | "object" | "mixed";

/** JSON text nested `depth` levels, built as text: the test itself must not recurse to make it. */
function deepText(depth: number, shape: Shape): string {
  if (shape === "array") return `${"[".repeat(depth)}1${"]".repeat(depth)}`;
  if (shape === "object") return `${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`;
  const open: string[] = [];
  const close: string[] = [];
  for (let i = 0; i < depth; i++) {
    open.push(i % 2 === 0 ? '{"k":[' : "[");
    close.push(i % 2 === 0 ? "]}" : "]");
  }
  return `${open.join("")}1${close.reverse().join("")}`;
}

/** JSON text `width` siblings wide, each a small object. */
function wideText(width: number): string {
  return `{${Array.from({ length: width }, (_, i) => `"k${i}":{"v":[${i},"x"]}`).join(",")}}`;
}

async function post(base: string, path: string, text: string, credential: string): Promise<{ status: number; body: { error?: { code?: string } } }> {
  const res = await fetch(`${base}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${credential}` },
    body: text,
  });
  const raw = await res.text();
  let body: { error?: { code?: string } } = {};
  try {
    body = JSON.parse(raw) as typeof body;
  } catch {
    body = {};
  }
  return { status: res.status, body };
}

/** Where a nested value goes in a request: each template is one endpoint and one place in its body. */
const PLACES: { name: string; service: "orchestrator" | "policy"; path: string; body: (v: string) => string }[] = [
  {
    name: "tool-call object arguments",
    service: "orchestrator",
    path: "/v1/tool-calls",
    body: (v) => `{"calls":[{"id":"h1","name":"search_sources","arguments":{"q":${v}}}]}`,
  },
  { name: "tool-call body", service: "orchestrator", path: "/v1/tool-calls", body: (v) => v },
  { name: "run context", service: "orchestrator", path: "/v1/runs", body: (v) => `{"model":"scripted:c04","context":${v}}` },
  { name: "run budgets", service: "orchestrator", path: "/v1/runs", body: (v) => `{"model":"scripted:c04","budgets":${v}}` },
  { name: "provider response", service: "orchestrator", path: "/v1/providers/openai-responses/tool-calls", body: (v) => `{"response":${v}}` },
  { name: "provider chat response", service: "orchestrator", path: "/v1/providers/openai-chat/tool-calls", body: (v) => `{"response":{"choices":[${v}]}}` },
  { name: "MCP request params", service: "orchestrator", path: "/mcp", body: (v) => `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":${v}}` },
  { name: "run cancel", service: "orchestrator", path: "/v1/runs/run_01J00000000000000000000000/cancel", body: (v) => `{"reason":${v}}` },
  { name: "approval decision", service: "policy", path: "/v1/approvals/apr_missing/approve", body: (v) => `{"plan_hash":${v}}` },
  { name: "approval denial", service: "policy", path: "/v1/approvals/apr_missing/deny", body: (v) => `{"reason":${v}}` },
];

function target(service: "orchestrator" | "policy"): { base: string; credential: string } {
  return service === "orchestrator"
    ? { base: stack.orchestratorUrl, credential: stack.apiKeys.alice }
    : { base: stack.policyUrl, credential: stack.apiKeys.carol };
}

describe("deep and wide JSON on every endpoint", () => {
  it("answers a body nested deeper than the limit with a typed 400 INVALID_JSON on every endpoint, and logs it", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...PLACES),
        fc.integer({ min: MAX_REQUEST_DEPTH + 1, max: 12_000 }),
        fc.constantFrom<Shape>("array", "object", "mixed"),
        async (place, depth, shape) => {
          const { base, credential } = target(place.service);
          const text = place.body(deepText(depth, shape));
          // Policy's body limit is 16 KiB: what does not fit is a typed 413 before any parser runs.
          const answer = await post(base, place.path, text, credential);
          expect(answer.status).not.toBe(500);
          if (answer.status === 413) expect(answer.body.error?.code).toBe("INVALID_REQUEST");
          else expect([answer.status, answer.body.error?.code]).toEqual([400, "INVALID_JSON"]);
        },
      ),
      { numRuns: 40 },
    );
    for (const service of ["orchestrator", "policy"] as const) {
      expect(
        stack
          .process(service)
          .logs()
          .some((l) => l.msg === "request refused: JSON nested too deep"),
      ).toBe(true);
    }
  });

  it("answers wide and moderately deep bodies on every endpoint with a typed answer, never a 500", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...PLACES),
        fc.oneof(
          fc.integer({ min: 1, max: 4_000 }).map((w) => wideText(w)),
          fc.tuple(fc.integer({ min: 1, max: MAX_REQUEST_DEPTH - 8 }), fc.constantFrom<Shape>("array", "object", "mixed")).map(([d, s]) => deepText(d, s)),
        ),
        async (place, value) => {
          const { base, credential } = target(place.service);
          const answer = await post(base, place.path, place.body(value), credential);
          expect(answer.status).not.toBe(500);
          if (answer.status >= 400) expect(typeof answer.body.error?.code === "string" || place.path === "/mcp").toBe(true);
        },
      ),
      { numRuns: 40 },
    );
  });

  it("ends a call whose arguments text nests 10,000 deep with a typed terminal outcome, logged by policy", async () => {
    for (const shape of ["array", "object", "mixed"] as const) {
      const args = deepText(10_000, shape);
      const submitted = await stack.api<{ results: { call_id: string; result?: CallResult }[] }>("POST", "/v1/tool-calls", {
        calls: [{ id: `deep_${shape}`, name: "search_sources", arguments: args }],
        wait_ms: 20_000,
      });
      expect([200, 202]).toContain(submitted.status);
      const callId = submitted.body.results[0]!.call_id;
      const result = await resultOf(stack, callId);
      expect(result).toMatchObject({ ok: false, retryable: false });
      expect(["INVALID_JSON", "INVALID_ARGUMENTS"]).toContain((result.error as { code: string }).code);
      await waitFor(
        () =>
          stack
            .process("policy")
            .logs()
            .some((l) => l.msg === "proposal not authorized" && l.call_id === callId),
        {
          description: `policy logging why ${callId} was refused`,
        },
      );
    }
    // And 10,000-deep object arguments never reach a parser that recurses: a typed 400, with its log line.
    const before = stack.process("orchestrator").logs().length;
    const answer = await post(
      stack.orchestratorUrl,
      "/v1/tool-calls",
      `{"calls":[{"id":"h1","name":"search_sources","arguments":${deepText(10_000, "object")}}]}`,
      stack.apiKeys.alice,
    );
    expect([answer.status, answer.body.error?.code]).toEqual([400, "INVALID_JSON"]);
    // The log line is read from the process's output, which may trail the answer on a busy machine.
    await waitFor(
      () =>
        stack
          .process("orchestrator")
          .logs()
          .slice(before)
          .some((l) => l.msg === "request refused: JSON nested too deep"),
      { description: "the orchestrator logging the refused body" },
    );
  });
});
