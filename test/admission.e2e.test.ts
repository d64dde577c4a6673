import { PrivateFerretDb, Stack, testInfra, waitFor } from "@toolgate/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";

// The front door bounds the work it starts at once: while the database does not answer, the requests already
// admitted wait on it, the next ones wait in line for a place (first come, first served, no longer than the
// deadline) without adding their claims to the store's backlog, and beyond the line a request is answered 503
// at once. Once the store answers, the one in line gets in, and every request is served. The database is this
// file's own.

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
    env: { orchestrator: { ORCHESTRATOR_MAX_SUBMISSIONS: String(LIMIT), ORCHESTRATOR_MAX_WAITING: "1", ORCHESTRATOR_PROBE_TIMEOUT_MS: "10000" } },
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

it("lets one request wait in line beyond its bound, refuses the next at once, and serves them all once the store answers", async () => {
  expect((await post(0, "warm-up")).status).toBe(200);
  const overloaded = () =>
    stack
      .process("orchestrator")
      .logs()
      .filter((l) => l.msg === "request refused: overloaded");

  ferret.pause();
  let inLine: ReturnType<typeof post>;
  try {
    const admitted = [post(1, "key-1"), post(2, "key-2")];
    // Both claims are in flight once both requests are waiting on the store (answered 503 at the 2 s deadline,
    // their claims still going on): only then is the bound reached.
    for (const answer of await Promise.all(admitted)) expect(answer.body.error).toMatchObject({ code: "UNAVAILABLE", details: { dependency: "deadline" } });

    // Two more: the line holds one of them, the other is refused at once (which one depends on which the server
    // reads first).
    const late = [post(3, "key-3"), post(4, "key-4")];
    const first = await Promise.race(late.map((answer, i) => answer.then((a) => ({ i, a }))));
    expect(first.a).toMatchObject({ status: 503, body: { error: { code: "UNAVAILABLE", details: { dependency: "capacity" } } } });
    expect(Number(first.a.retryAfter)).toBeGreaterThanOrEqual(1);
    expect(first.a.ms).toBeLessThan(1_000);
    inLine = late[1 - first.i]!;
    await waitFor(() => overloaded().length >= 1, { timeoutMs: 5_000, description: "the refusal in the orchestrator's log" });
    expect(overloaded()[0]).toMatchObject({ status: 503, in_flight: LIMIT, waiting: 1 });
  } finally {
    ferret.resume();
  }

  // The request in line got the first place given back once the store answered, and was served within its wait.
  const served3 = await inLine;
  expect([served3.status, served3.body.results?.[0]?.status]).toEqual([200, "done"]);
  // Every request is served now: the two whose claims waited, and the one refused (the one in line again too).
  for (const [n, key] of [
    [1, "key-1"],
    [2, "key-2"],
    [3, "key-3"],
    [4, "key-4"],
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
