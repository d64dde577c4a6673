import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, Stack, resultOf, settledCallEvents, testInfra, waitFor, waitForCallEvents, type AuditedEvent } from "@toolgate/testkit";
import { MongoClient } from "mongodb";
import { chromium, type BrowserContext, type Locator, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REFUND } from "./fixtures/refund-contract.js";

// The run timeline page in a real browser (Debian's headless Chromium driven by playwright-core), against the
// services as processes: it follows a managed run live, through an approval wait, until the run ends, and what
// it shows of each call is what the run's audit trail holds. Sensitive arguments never reach the page.
const APPROVE_SAVES = `@id("test-approve-saves")
forbid (principal, action == Action::"call", resource == Tool::"save_evidence") when { !context.approved };
`;
const SECRET_CARD = "4111111111111111";
const SECRET_TOKEN = "tok_live_9f8e7d6c5b4a3f2e";
const MARKUP = '<img src=x onerror="window.__pwned = true">';

interface TimelineCall {
  call_id: string;
  tool: string;
  status: string;
  approval?: { approval_id: string };
}
interface Timeline {
  status: string;
  live: boolean;
  calls: TimelineCall[];
}

let stack: Stack;
let mongo: MongoClient;
let browser: BrowserContext;
let profile: string;
let auditUrl: string;
const shots = process.env.TOOLGATE_SCREENSHOT_DIR ?? join(tmpdir(), "toolgate-test-output", "run-timeline");

beforeAll(async () => {
  const infra = testInfra();
  // Audit on a port known in advance, so that the orchestrator can link each trail there.
  const auditPort = await freePort();
  auditUrl = `http://127.0.0.1:${auditPort}`;
  stack = await Stack.start({
    natsUrl: infra.natsUrl,
    mongoUrl: infra.mongoUrl,
    policyFiles: { "approve-test.cedar": APPROVE_SAVES },
    // chaos_flaky fails its first attempts on purpose: a call with retries.
    toolsets: ["research", "chaos"],
    env: { audit: { HTTP_PORT: String(auditPort) }, orchestrator: { ORCHESTRATOR_AUDIT_URL: auditUrl } },
  });
  mongo = await new MongoClient(infra.mongoUrl).connect();
  expect(await stack.publishContract(REFUND)).toMatchObject({ ok: true });
  mkdirSync(shots, { recursive: true });
  console.log(`run timeline screenshots: ${shots}`);
  profile = mkdtempSync(join(tmpdir(), "tg-chromium-"));
  browser = await chromium.launchPersistentContext(profile, {
    executablePath: "/usr/bin/chromium",
    headless: true,
    timezoneId: "Asia/Kolkata",
    viewport: { width: 1280, height: 900 },
    // Without the background-networking flags Chromium's own connections are refused on this kind of machine.
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
});

afterAll(async () => {
  await browser?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
  await stack?.stop();
  await mongo?.db(`${stack.name}_runtime`).dropDatabase();
  await mongo?.db(`${stack.name}_tools`).dropDatabase();
  await mongo?.close();
});

const timeline = async (runId: string, user: "alice" | "bob" = "alice") => stack.api<Timeline>("GET", `/v1/runs/${runId}/timeline`, undefined, user);

/** Opens the timeline of `runId` signed in as `user`; `problems` collects console errors (a CSP violation is one). */
async function openTimeline(runId: string, credential: string): Promise<{ page: Page; problems: string[]; navigations: string[] }> {
  const page = await browser.newPage();
  const problems: string[] = [];
  const navigations: string[] = [];
  page.on("console", (message) => {
    if (message.type() === "error") problems.push(message.text());
  });
  page.on("pageerror", (error) => problems.push(error.message));
  page.on("framenavigated", (frame) => {
    if (frame === page.mainFrame()) navigations.push(frame.url());
  });
  const response = await page.goto(`${stack.orchestratorUrl}/timeline?run_id=${runId}`);
  expect(response!.status()).toBe(200);
  expect(response!.headers()["content-security-policy"]).toBe(
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'none'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'",
  );
  await page.getByLabel("API key or JWT").fill(credential);
  await page.getByRole("button", { name: "Sign in" }).click();
  return { page, problems, navigations };
}

const field = (scope: Locator, name: string) => scope.locator(`[data-field="${name}"]`);

/** The event rows a call's card (or the run's table) shows: type, attempt, chain position and time. */
const eventRows = (scope: Locator) =>
  scope
    .locator("tr[data-event-type]")
    .evaluateAll((rows: { getAttribute(name: string): string | null }[]) =>
      rows.map((r) => `${r.getAttribute("data-event-type")}:${r.getAttribute("data-attempt")}:${r.getAttribute("data-seq")}@${r.getAttribute("data-time")}`),
    );
const auditRows = (events: readonly AuditedEvent["event"][]) =>
  [...events].sort((a, b) => a.seq - b.seq).map((e) => `${e.type}:${(e as { attempt?: number }).attempt ?? 1}:${e.seq}@${e.time}`);

const TERMINAL = new Set(["rejected", "denied", "completed", "outcome_unknown"]);

describe("the run timeline page", () => {
  it("follows a managed run live through an approval wait to its end, and its rows are the run's audit trail", async () => {
    const started = await stack.api<{ run_id: string }>("POST", "/v1/runs", {
      model: "scripted:c04",
      input: "Research agent state management for task_id task_timeline",
      context: { task_id: "task_timeline" },
    });
    expect(started.status).toBe(202);
    const runId = started.body.run_id;
    // The third call (save_evidence) needs a human: the run waits there.
    const waiting = await waitFor(
      async () => {
        const t = (await timeline(runId)).body;
        return t.calls.find((c) => c.status === "awaiting_approval");
      },
      { timeoutMs: 30_000, description: "the run to wait for an approval" },
    );
    expect(waiting.tool).toBe("save_evidence");

    const { page, problems, navigations } = await openTimeline(runId, stack.apiKeys.alice);
    const run = page.locator("#run");
    await page.locator(`article[data-call-id="${waiting.call_id}"][data-status="awaiting_approval"]`).waitFor();
    expect(await run.getAttribute("data-live")).toBe("true");
    expect(await field(run, "run-status").innerText()).toBe("running");
    expect(await field(run, "updates").innerText()).toBe("live: refreshed every second");
    expect(await page.locator("h2.turn").evaluateAll((hs: { getAttribute(n: string): string | null }[]) => hs.map((h) => h.getAttribute("data-turn")))).toEqual(
      ["0", "1", "2"],
    );
    const cards = page.locator("article.call");
    expect(await cards.evaluateAll((as: { getAttribute(n: string): string | null }[]) => as.map((a) => a.getAttribute("data-status")))).toEqual([
      "completed",
      "completed",
      "awaiting_approval",
    ]);
    const saving = page.locator(`article[data-call-id="${waiting.call_id}"]`);
    expect(await field(saving, "tool").innerText()).toBe("save_evidence");
    expect(await field(saving, "status").innerText()).toBe("awaiting approval");
    // The approval wait is drawn, open-ended, and grows while the page watches.
    expect(await saving.locator('.seg[data-phase="approval"]').count()).toBe(1);
    await page.evaluate("window.__sameDocument = true");
    const before = await field(saving, "duration").innerText();
    expect(before).toMatch(/so far$/);
    await expect.poll(() => field(saving, "duration").innerText(), { timeout: 5_000 }).not.toBe(before);
    await page.screenshot({ path: join(shots, "run-timeline-live-1280.png"), fullPage: true });

    // A human approves; the page follows without being reloaded.
    const approvalId = waiting.approval!.approval_id;
    expect((await stack.policyApi("POST", `/v1/approvals/${approvalId}/approve`, {})).status).toBe(200);
    await page.locator('#run[data-status="completed"][data-live="false"]').waitFor({ timeout: 30_000 });
    expect(await field(saving, "status").innerText()).toBe("completed");
    expect(await field(run, "updates").innerText()).toBe("the run has ended");
    expect(await field(run, "final-text").innerText()).toMatch(/^Saved evidence ev_/);
    // The same document all along: updated in place, never reloaded.
    expect(await page.evaluate("window.__sameDocument")).toBe(true);
    expect(navigations.map((u) => new URL(u).pathname)).toEqual(navigations.map(() => "/timeline"));
    // Every phase of the approved call: policy, the approval wait, queued, its attempt, attaching.
    expect(
      await saving.locator(".seg").evaluateAll((segs: { getAttribute(n: string): string | null }[]) => segs.map((s) => s.getAttribute("data-phase"))),
    ).toEqual(["policy", "approval", "queue", "attempt", "attach"]);
    await saving.locator("details.more summary").click();
    for (const width of [1280, 400]) {
      await page.setViewportSize({ width, height: 900 });
      expect(await page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")).toBe(0);
      await page.screenshot({ path: join(shots, `run-timeline-ended-${width}.png`), fullPage: true });
    }
    expect(readFileSync(join(shots, "run-timeline-ended-400.png")).readUInt32BE(16)).toBe(400);

    // What the page shows against what audit stored: every call, every event of it, its status and error code.
    const trail = (await stack.trace(runId)).map((r) => r.event);
    const byCall = new Map<string, AuditedEvent["event"][]>();
    for (const e of trail) if (e.kind === "call" && e.call_id) byCall.set(e.call_id, [...(byCall.get(e.call_id) ?? []), e]);
    expect(await cards.evaluateAll((as: { getAttribute(n: string): string | null }[]) => as.map((a) => a.getAttribute("data-call-id")))).toEqual([
      ...byCall.keys(),
    ]);
    for (const [callId, events] of byCall) {
      const card = page.locator(`article[data-call-id="${callId}"]`);
      expect(await eventRows(card), callId).toEqual(auditRows(events));
      const proposed = events.find((e) => e.type === "proposed")!;
      expect(await field(card, "tool").innerText()).toBe((proposed.payload as { tool_name: string }).tool_name);
      const terminal = events.find((e) => TERMINAL.has(e.type))!;
      expect(await card.getAttribute("data-status")).toBe(terminal.type);
      const result = (terminal.payload as { result: { ok: boolean; error?: { code: string } } }).result;
      expect(await field(card, "error-code").count()).toBe(result.ok ? 0 : 1);
      expect(await card.locator('.seg[data-phase="attempt"]').count()).toBe(events.filter((e) => e.type === "started").length);
      expect(await card.locator(".mark").count()).toBe(events.length);
      // The link goes to this call's trail on the audit API, which answers with the same events.
      const href = (await field(card, "audit").getAttribute("href"))!;
      expect(href).toBe(`${auditUrl}/v1/calls/${callId}/events`);
      const linked = (await (await fetch(href)).json()) as { events: AuditedEvent[] };
      expect(auditRows(linked.events.map((r) => r.event))).toEqual(auditRows(events));
    }
    expect(await eventRows(page.locator("#run-events"))).toEqual(auditRows(trail.filter((e) => e.kind === "run")));
    expect(await field(run, "run-audit").locator("a").getAttribute("href")).toBe(`${auditUrl}/v1/runs/${runId}/events`);
    // The approved call's arguments as audit stored them (the normalized arguments of its authorization).
    const authorized = byCall.get(waiting.call_id)!.find((e) => e.type === "authorized")!;
    expect(JSON.parse(await saving.getByTestId("arguments").innerText())).toEqual((authorized.payload as { arguments: unknown }).arguments);
    expect(problems).toEqual([]);
    await page.close();
  });

  it("masks sensitive arguments, shows attempts and error codes, renders model text as text, and shows a run only to its owner", async () => {
    const refund = {
      order_id: "ord_7731",
      amount_cents: 12_999,
      card_number: SECRET_CARD,
      auth: { account: "acct_acme_eu", token: SECRET_TOKEN },
      reason: "damaged parcel",
    };
    const submitted = await stack.api<{ run_id: string; results: { call_id: string }[] }>("POST", "/v1/tool-calls", {
      context: { task_id: "task_timeline" },
      calls: [
        { id: "h0", name: "chaos_flaky", arguments: { n: 1, failures: 2, code: "UPSTREAM_UNAVAILABLE", retry_after_ms: 100 } },
        { id: "h1", name: "issue_refund", arguments: refund },
        { id: "h2", name: "search_sources", arguments: { query: "agent state", source_type: "official", limit: 50 } },
        { id: "h3", name: MARKUP, arguments: {} },
      ],
      wait_ms: 0,
    });
    expect(submitted.status).toBe(202);
    const runId = submitted.body.run_id;
    const [flakyCall, refundCall, searchCall, markupCall] = submitted.body.results.map((r) => r.call_id) as [string, string, string, string];
    const requested = await waitForCallEvents(stack, refundCall, (es) => es.some((e) => e.type === "approval_requested"));
    const approvalId = (requested.find((e) => e.type === "approval_requested")!.payload as { approval_id: string }).approval_id;
    expect((await stack.policyApi("POST", `/v1/approvals/${approvalId}/deny`, { reason: "not this one" })).status).toBe(200);
    expect(await resultOf(stack, refundCall)).toMatchObject({ ok: false, error: { code: "APPROVAL_DENIED" } });
    const trails = new Map<string, AuditedEvent["event"][]>();
    for (const id of [flakyCall, refundCall, searchCall, markupCall]) trails.set(id, await settledCallEvents(stack, id));
    // Neither the API's answer nor the page holds the secrets.
    expect(JSON.stringify((await timeline(runId)).body)).not.toMatch(new RegExp(`${SECRET_CARD}|${SECRET_TOKEN}`));

    const { page, problems } = await openTimeline(runId, stack.apiKeys.alice);
    const card = (id: string) => page.locator(`article[data-call-id="${id}"]`);
    await card(markupCall).waitFor();
    await page.locator('#run[data-live="false"]').waitFor();
    expect(await field(page.locator("#run"), "run-status").innerText()).toBe("external");
    expect(await field(card(refundCall), "error-code").innerText()).toBe("APPROVAL_DENIED");
    expect(await field(card(searchCall), "error-code").innerText()).toBe("INVALID_ARGUMENTS");
    expect(await field(card(markupCall), "error-code").innerText()).toBe("UNKNOWN_TOOL");
    expect(await field(card(markupCall), "tool").innerText()).toBe(MARKUP);
    // Three attempts of the flaky write: two failed with the code its retries name, the last one succeeded.
    const flaky = card(flakyCall);
    expect(await flaky.getAttribute("data-status")).toBe("completed");
    expect(await flaky.locator('.seg[data-phase="attempt"]').count()).toBe(3);
    expect(await flaky.locator('.seg[data-phase="attempt"].failed').count()).toBe(2);
    expect(await flaky.locator(".line").first().innerText()).toContain("3 attempts");
    const retries = trails
      .get(flakyCall)!
      .filter((e) => e.type === "retry_scheduled")
      .map((e) => e.payload as { failed_attempt: number; code: string; delay_ms: number });
    expect(retries.map((r) => [r.failed_attempt, r.code])).toEqual([
      [1, "UPSTREAM_UNAVAILABLE"],
      [2, "UPSTREAM_UNAVAILABLE"],
    ]);
    expect(await flaky.locator('tr[data-event-type="retry_scheduled"] td.detail').allTextContents()).toEqual(
      retries.map((r) => `attempt ${r.failed_attempt} failed: ${r.code}; next in ${r.delay_ms} ms`),
    );
    for (const [id, trail] of trails) expect(await eventRows(card(id)), id).toEqual(auditRows(trail));
    expect(await page.locator("img").count()).toBe(0);
    expect(await page.evaluate("typeof window.__pwned")).toBe("undefined");
    const html = await page.content();
    for (const secret of [SECRET_CARD, SECRET_TOKEN]) expect(html).not.toContain(secret);
    const shown = card(refundCall).getByTestId("arguments");
    expect(await shown.locator(".masked").allTextContents()).toEqual(["hidden: sensitive", "hidden: sensitive"]);
    expect(await card(refundCall).locator("details.more").textContent()).toContain(
      "Hidden because the tool's contract marks them sensitive: /card_number, /auth/token",
    );
    // As audit stored the proposal: the same fields redacted.
    const trail = trails.get(refundCall)!;
    const proposal = trail.find((e) => e.type === "proposed")!.payload as { arguments_json: string };
    const asShown = (await shown.textContent())!.replaceAll("hidden: sensitive", JSON.stringify("[REDACTED]"));
    expect(JSON.parse(asShown)).toEqual(JSON.parse(proposal.arguments_json));
    await page.screenshot({ path: join(shots, "run-timeline-errors-1280.png"), fullPage: true });
    expect(problems).toEqual([]);
    await page.close();

    // Another principal learns nothing, not even that the run exists.
    expect((await timeline(runId, "bob")).status).toBe(404);
    const other = await openTimeline(runId, stack.apiKeys.bob);
    await expect.poll(() => other.page.getByTestId("status").innerText()).toBe("No such run (or it is not yours).");
    expect(await other.page.locator("article.call").count()).toBe(0);
    await other.page.close();
    // A credential the API does not accept is sent back to the sign-in form.
    const stranger = await openTimeline(runId, "tgk_not_a_real_key_0000000000");
    await expect.poll(() => stranger.page.getByTestId("who").innerText()).toBe("That credential was not accepted.");
    expect(await stranger.page.locator("#signin").isVisible()).toBe(true);
    await stranger.page.close();
  });
});
