import { Stack, testInfra, type RunView } from "@toolgate/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// Identity comes only from the authenticated caller: API keys and JWTs (verified with jose), per tenant.
let stack: Stack;

beforeAll(async () => {
  const infra = testInfra();
  stack = await Stack.start({ natsUrl: infra.natsUrl, mongoUrl: infra.mongoUrl });
});

afterAll(async () => {
  await stack?.stop();
});

describe("callers authenticate with a JWT or an API key", () => {
  it("runs as the JWT's subject in the issuer's tenant, whatever tenant the token claims", async () => {
    const token = await stack.jwt({ sub: "carol", roles: ["researcher"], tenant: "globex" });
    const started = await stack.apiWith<{ run_id: string }>(token, "POST", "/v1/runs", {
      model: "scripted:c04-no-match",
      input: "q",
      context: { task_id: "t" },
    });
    expect(started.status).toBe(202);
    const trace = await stack.trace(started.body.run_id);
    for (const { event } of trace)
      expect((event as unknown as { principal: unknown }).principal).toEqual({ tenant: "acme", subject: "carol", roles: ["researcher"] });
    // Another caller cannot read the run: it looks as if it did not exist.
    expect((await stack.api("GET", `/v1/runs/${started.body.run_id}`)).status).toBe(404);
    const own = await stack.apiWith<RunView>(token, "GET", `/v1/runs/${started.body.run_id}?wait_ms=5000`);
    expect(own.body.status).toBe("completed");
  });

  it("refuses a missing, unknown or forged credential with 401 and a typed error", async () => {
    const forged = `${(await stack.jwt({ sub: "carol", roles: ["admin"] })).slice(0, -4)}AAAA`;
    for (const credential of ["", "tgk_not_a_real_key_000000", forged]) {
      const response = await stack.apiWith<{ error: { code: string } }>(credential, "POST", "/v1/runs", { model: "scripted:c04", input: "q" });
      expect(response.status).toBe(401);
      expect(response.body.error.code).toBe("UNAUTHENTICATED");
    }
  });

  it("denies a principal without a grant at tool level", async () => {
    const run = await stack.runToEnd("scripted:c04-no-match", "q", { task_id: "t" }, "bob");
    expect(run.calls[0]!.result).toMatchObject({ ok: false, error: { code: "PERMISSION_DENIED" } });
  });
});
