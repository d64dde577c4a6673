import { PrivateFerretDb, Stack, testInfra, waitFor } from "@toolgate/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";

// The front door bounds the work it starts at once: while the database does not answer, the requests already
// admitted wait on it, and the next one is answered 503 at once — without adding its own claim to the store's
// backlog. Once the store answers again every request is served. The database is this file's own.

const LIMIT = 2;
let ferret: PrivateFerretDb;
let stack: Stack;

beforeAll(async () => {
  ferret = await PrivateFerretDb.start();
  stack = await Stack.start({
    natsUrl: testInfra().natsUrl,
    mongoUrl: ferret.url,
    toolsets: ["chaos"],
    logLevel: "warn",
    // The probe must not declare the paused store down during the test: the bound is what refuses here.
    env: { orchestrator: { ORCHESTRATOR_MAX_SUBMISSIONS: String(LIMIT), ORCHESTRATOR_PROBE_TIMEOUT_MS: "10000" } },
  });
});

afterAll(async () => {
  ferret?.resume();
  await stack?.stop();
  await ferret?.stop();
});

const call = (n: number) => ({ calls: [{ id: `c-${n}`, name: "chaos_write", arguments: { n, delay_ms: 0, effect: "after_delay" } }], wait_ms: 10_000 });

async function post(n: number, key: string) {
  const started = Date.now();
  const response = await fetch(`${stack.orchestratorUrl}/v1/tool-calls`, {
    method: "POST",
    headers: { authorization: `Bearer ${stack.apiKeys.alice}`, "content-type": "application/json", "idempotency-key": key },
    body: JSON.stringify(call(n)),
  });
  const body = (await response.json()) as { error?: { code: string; details?: { dependency?: string } }; results?: { status: string }[] };
  return { status: response.status, retryAfter: response.headers.get("retry-after"), body, ms: Date.now() - started };
}

it("answers 503 at once beyond its bound while admitted requests wait on the store, and serves them all once it answers", async () => {
  expect((await post(0, "warm-up")).status).toBe(200);
  const overloaded = () =>
    stack
      .process("orchestrator")
      .logs()
      .filter((l) => l.msg === "request refused: overloaded");

  ferret.pause();
  let admitted: Promise<Awaited<ReturnType<typeof post>>>[];
  try {
    admitted = [post(1, "key-1"), post(2, "key-2")];
    // Both claims are in flight once both requests are waiting on the store (answered 503 at the 2 s deadline,
    // their claims still going on): only then is the bound reached.
    const waiting = await Promise.all(admitted);
    for (const answer of waiting) expect(answer.body.error).toMatchObject({ code: "UNAVAILABLE", details: { dependency: "deadline" } });

    const refused = await post(3, "key-3");
    expect(refused.status).toBe(503);
    expect(refused.body.error).toMatchObject({ code: "UNAVAILABLE", details: { dependency: "capacity" } });
    expect(Number(refused.retryAfter)).toBeGreaterThanOrEqual(1);
    expect(refused.ms).toBeLessThan(1_000);
    await waitFor(() => overloaded().length >= 1, { timeoutMs: 5_000, description: "the refusal in the orchestrator's log" });
    expect(overloaded()[0]).toMatchObject({ status: 503, in_flight: LIMIT });
  } finally {
    ferret.resume();
  }

  // Every request is served once the store answers: the two whose claims waited, and the one refused.
  for (const [n, key] of [
    [1, "key-1"],
    [2, "key-2"],
    [3, "key-3"],
  ] as const) {
    const served = await waitFor(
      async () => {
        const answer = await post(n, key);
        return answer.status === 200 && answer;
      },
      { timeoutMs: 30_000, description: `${key} to be served` },
    );
    expect(served.body.results![0]!.status).toBe("done");
  }
});
