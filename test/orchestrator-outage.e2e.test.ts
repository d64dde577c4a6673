import { PrivateFerretDb, PrivateNats, Stack, waitFor } from "@toolgate/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";

// While NATS or the database is down the API answers 503 with Retry-After within its deadline (a request waits
// for the dependency up to ORCHESTRATOR_UNAVAILABLE_AFTER_MS, 2 s, and goes on if it comes back meanwhile; never
// a hang, never a 500), /readyz says not ready, the transition is logged, and everything works again once the
// server is back. The servers are this file's own: killing or pausing them disturbs no other test.

let nats: PrivateNats;
let ferret: PrivateFerretDb;
let stack: Stack;

beforeAll(async () => {
  nats = await PrivateNats.start();
  ferret = await PrivateFerretDb.start();
  stack = await Stack.start({ natsUrl: nats.url, mongoUrl: ferret.url, toolsets: ["chaos"], logLevel: "warn" });
});

afterAll(async () => {
  await nats?.start();
  ferret?.resume();
  await stack?.stop();
  await nats?.stop();
  await ferret?.stop();
});

const call = (n: number) => ({ calls: [{ id: `c-${n}`, name: "chaos_write", arguments: { n, delay_ms: 0, effect: "after_delay" } }], wait_ms: 10_000 });

async function post(
  body: unknown,
  key?: string,
): Promise<{ status: number; headers: Headers; body: { error?: { code: string }; results?: { status: string }[] }; ms: number }> {
  const started = Date.now();
  const response = await fetch(`${stack.orchestratorUrl}/v1/tool-calls`, {
    method: "POST",
    headers: { authorization: `Bearer ${stack.apiKeys.alice}`, "content-type": "application/json", ...(key ? { "idempotency-key": key } : {}) },
    body: JSON.stringify(body),
  });
  return { status: response.status, headers: response.headers, body: (await response.json()) as never, ms: Date.now() - started };
}

const readiness = async (): Promise<number> => (await fetch(`${stack.orchestratorUrl}/readyz`)).status;
const logged = (msg: string) =>
  stack
    .process("orchestrator")
    .logs()
    .filter((l) => l.msg === msg);

it("answers 503 with Retry-After within its deadline while NATS is down, is not ready, and recovers when it is back", async () => {
  expect(await readiness()).toBe(200);
  expect((await post(call(1))).status).toBe(200);

  await nats.kill();
  await waitFor(async () => (await readiness()) === 503, { timeoutMs: 5_000, description: "/readyz to report NATS down" });
  for (const key of [undefined, "outage-key"]) {
    const refused = await post(call(2), key);
    expect(refused.status).toBe(503);
    expect(refused.body.error).toMatchObject({ code: "UNAVAILABLE" });
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    // It waited for NATS (the 2 s deadline), not for a publish to time out.
    expect(refused.ms).toBeGreaterThanOrEqual(1_900);
    expect(refused.ms).toBeLessThan(3_500);
  }
  await waitFor(() => logged("dependency unavailable: refusing new work with 503").length >= 1, { timeoutMs: 5_000, description: "the outage in the log" });
  // Every 5xx is logged with its cause (the lines reach the test through the process's output: wait for them).
  const refusals = await waitFor(() => logged("request refused: dependency unavailable").length >= 2 && logged("request refused: dependency unavailable"), {
    timeoutMs: 5_000,
    description: "both refusals in the orchestrator's log",
  });
  expect(refusals[0]).toMatchObject({ status: 503, unavailable: [{ dependency: "nats" }] });

  await nats.start();
  await waitFor(async () => (await readiness()) === 200, { timeoutMs: 30_000, description: "/readyz to report ready again" });
  // The refused keyed request was never claimed: its retry runs now.
  const retried = await post(call(2), "outage-key");
  expect(retried.status).toBe(200);
  expect(retried.body.results![0]!.status).toBe("done");
  await waitFor(() => logged("dependency available again").length >= 1, { timeoutMs: 5_000, description: "the recovery in the orchestrator's log" });
});

it("answers 503 within its deadline while the database does not answer, and recovers when it does", async () => {
  ferret.pause();
  try {
    // Before the probe notices, the request's own deadline (2 s) bounds it; after, it waits up to as long.
    const refused = await post(call(3));
    expect(refused.status).toBe(503);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(refused.ms).toBeLessThan(3_000);
    // A probe counts as failed after ORCHESTRATOR_PROBE_TIMEOUT_MS (5 s): a slow store is not a down one.
    await waitFor(async () => (await readiness()) === 503, { timeoutMs: 10_000, description: "/readyz to report the database down" });
    const known = await post(call(4));
    expect(known.status).toBe(503);
    expect(known.ms).toBeLessThan(3_500);
    // A request that arrives while the database is known to be down, and sees it come back within its wait, is
    // served: it is the first of the backlog to run, not refused to retry a Retry-After later.
    const waiting = post(call(6), "outage-waits");
    await waitFor(async () => ((await (await fetch(`${stack.orchestratorUrl}/readyz`)).json()) as { waiting?: number }).waiting === 1, {
      timeoutMs: 1_500,
      description: "/readyz to count the request waiting for the database",
    });
    ferret.resume();
    const served = await waiting;
    expect(served.status).toBe(200);
    expect(served.body.results![0]!.status).toBe("done");
    expect(logged("dependency available again").at(-1)).toMatchObject({ dependency: "mongo", waiting: 1 });
  } finally {
    ferret.resume();
  }
  await waitFor(async () => (await readiness()) === 200, { timeoutMs: 30_000, description: "/readyz to report ready again" });
  const after = await post(call(5));
  expect(after.status).toBe(200);
  expect(
    stack
      .process("orchestrator")
      .logs()
      .some((l) => l.level === "error" && l.msg === "request failed"),
  ).toBe(false);
});
