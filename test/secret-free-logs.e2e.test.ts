import { connect, type NatsConnection } from "@nats-io/transport-node";
import { Stack, testInfra, waitFor, waitForCallEvents } from "@toolgate/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { REFUND } from "./fixtures/refund-contract.js";

// Secrets never appear in logs, events or audit records (issue 14, item 5): an e2e run at debug level that
// authenticates with API keys and a JWT, signs every event, forges one, and proposes a call with sensitive
// arguments; then every line each service printed, and everything audit stored, is searched for each secret.
const SECRET_CARD = "4111111111111111";
const SECRET_TOKEN = "tok_live_5e4d3c2b1a0f9e8d";

let stack: Stack;
let nc: NatsConnection;

beforeAll(async () => {
  const infra = testInfra();
  stack = await Stack.start({ natsUrl: infra.natsUrl, mongoUrl: infra.mongoUrl, logLevel: "debug" });
  await stack.publishContract(REFUND);
  nc = await connect({ servers: infra.natsUrl });
});

afterAll(async () => {
  await nc?.close();
  await stack?.stop();
});

it("prints, publishes and stores no API key, token, signing key, NATS seed or sensitive argument", async () => {
  // A run through every service, authenticated with an API key; a host call authenticated with a JWT.
  const run = await stack.runToEnd("scripted:c04", "Research task task_id=task_c04: state management.", { task_id: "task_c04" });
  expect(run.status).toBe("completed");
  const jwt = await stack.jwt({ sub: "alice", roles: ["researcher"] });
  const response = await fetch(`${stack.orchestratorUrl}/v1/tool-calls`, {
    method: "POST",
    headers: { authorization: `Bearer ${jwt}`, "content-type": "application/json" },
    body: JSON.stringify({
      context: { task_id: "task_c04" },
      calls: [
        {
          id: "r1",
          name: "issue_refund",
          arguments: { order_id: "ord_1", amount_cents: 500, card_number: SECRET_CARD, auth: { account: "acct_1", token: SECRET_TOKEN }, reason: "damaged" },
        },
      ],
      wait_ms: 0,
    }),
  });
  expect(response.status).toBe(202);
  const { results } = (await response.json()) as { results: { call_id: string }[] };
  const callId = results[0]!.call_id;
  const events = await waitForCallEvents(stack, callId, (es) => es.some((e) => e.type === "approval_requested"));
  const approvalId = events.find((e) => e.type === "approval_requested")!.payload.approval_id as string;
  // The approver denies it (a credential in a header again); a refused forgery goes through the logs too.
  expect((await stack.policyApi("POST", `/v1/approvals/${approvalId}/deny`, { reason: "not asked for" })).status).toBe(200);
  await stack.publishEvent(nc, `${stack.name}.call.${callId}.completed`, JSON.stringify({ forged: true }));
  await waitForCallEvents(stack, callId, (es) => es.some((e) => e.type === "result_attached"));
  await waitFor(
    () =>
      stack
        .process("orchestrator")
        .logs()
        .some((l) => l.msg === "message rejected"),
    { description: "the forgery's rejection" },
  );

  const secrets = [...stack.secrets(), jwt, SECRET_CARD, SECRET_TOKEN];
  // A key's distinctive end as well as the whole: a PEM or a long value may be cut or wrapped in a line.
  const needles = secrets.flatMap((secret) => [secret, secret.slice(-24)]);
  expect(needles.every((n) => n.length >= 16)).toBe(true);
  const printed = stack.processes.flatMap((p) => p.logs().map((line) => ({ service: p.name, text: JSON.stringify(line) })));
  // Start-up (each service's configuration read), the requests, the denial and the forgery's rejection.
  expect(printed.length).toBeGreaterThan(20);
  expect(printed.some((l) => l.text.includes("message rejected"))).toBe(true);
  const leaks = printed.filter((l) => needles.some((n) => l.text.includes(n)));
  expect(leaks.map((l) => `${l.service}: ${l.text.slice(0, 200)}`)).toEqual([]);

  // What audit stored of the refund: its sensitive arguments redacted in every event that carried them.
  const audited = JSON.stringify((await stack.audit<{ events: unknown[] }>(`/v1/calls/${callId}/events`)).body.events);
  expect(audited).toContain("ord_1");
  for (const needle of needles) expect(audited).not.toContain(needle);
  const runTrail = JSON.stringify((await stack.audit<{ events: unknown[] }>(`/v1/runs/${run.run_id}/events`)).body.events);
  for (const needle of needles) expect(runTrail).not.toContain(needle);
});
