import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Stack, resultOf, testInfra, waitForCallEvents } from "@toolgate/testkit";
import { MongoClient } from "mongodb";
import { chromium, type BrowserContext, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// The approvers' web page in a real browser (Debian's headless Chromium driven by playwright-core): it lists the
// pending approval with what an approver must see, and its Approve button makes the call run.
const DOC = "https://example.test/docs/openai-agents-sdk/sessions";
const APPROVE_SAVES = `@id("test-approve-saves")
forbid (principal, action == Action::"call", resource == Tool::"save_evidence") when { !context.approved };
`;
// Markup from the model must show as text, never run; an invisible character must be pointed out.
const CLAIM = 'Sessions persist state <img src=x onerror="window.__pwned = true"> across\u200B runs.';

let stack: Stack;
let mongo: MongoClient;
let browser: BrowserContext;
let profile: string;

beforeAll(async () => {
  const infra = testInfra();
  stack = await Stack.start({ natsUrl: infra.natsUrl, mongoUrl: infra.mongoUrl, policyFiles: { "approve-test.cedar": APPROVE_SAVES } });
  mongo = await new MongoClient(infra.mongoUrl).connect();
  profile = mkdtempSync(join(tmpdir(), "tg-chromium-"));
  browser = await chromium.launchPersistentContext(profile, {
    executablePath: "/usr/bin/chromium",
    headless: true,
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

const cellTexts = async (page: Page, callId: string) => page.locator(`tr[data-call-id="${callId}"] > td`).allInnerTexts();

describe("the approval page", () => {
  it("shows a pending call to an approver — tool, redacted arguments, plan hash, requester, risk, expiry — and Approve runs it", async () => {
    const args = { task_id: "task_page", claim: CLAIM, source_url: DOC };
    const body = { context: { task_id: "task_page" }, calls: [{ id: "h1", name: "save_evidence", arguments: args }], wait_ms: 0 };
    const submitted = await stack.api<{ results: { call_id: string }[] }>("POST", "/v1/tool-calls", body);
    const callId = submitted.body.results[0]!.call_id;
    const events = await waitForCallEvents(stack, callId, (es) => es.some((e) => e.type === "approval_requested"));
    const requested = events.find((e) => e.type === "approval_requested")!;

    const page = await browser.newPage();
    const response = await page.goto(`${stack.policyUrl}/approvals`);
    expect(response!.status()).toBe(200);
    expect(response!.headers()["content-security-policy"]).toContain("script-src 'self'");
    await page.getByLabel("Approver credential (API key or JWT)").fill(stack.apiKeys.carol);
    await page.getByRole("button", { name: "Sign in" }).click();
    await expect.poll(() => page.getByTestId("who").innerText()).toBe("signed in as acme/carol");

    const row = page.locator(`tr[data-call-id="${callId}"]`);
    await row.waitFor();
    const [tool, requester, risk, shown, planHash, expires] = await cellTexts(page, callId);
    expect(tool).toBe("save_evidence@1.0.0");
    expect(requester).toBe("acme/alice");
    expect(risk).toBe("medium");
    expect(planHash).toBe(requested.payload.plan_hash);
    expect(expires).toBe(requested.payload.expires_at);
    // The normalized arguments (RFC 8785: keys sorted), the text exactly as the model wrote it.
    expect(shown).toContain(JSON.stringify({ claim: CLAIM, source_url: DOC, task_id: "task_page" }, null, 2));
    expect(shown).toContain("/claim contains invisible or direction-changing characters");
    expect(await page.locator("img").count()).toBe(0);
    expect(await page.evaluate("typeof window.__pwned")).toBe("undefined");
    // The credential is not left in the form.
    expect(await page.locator("#credential").inputValue()).toBe("");

    await row.getByRole("button", { name: "Approve" }).click();
    await expect.poll(() => page.getByTestId("status").innerText()).toMatch(/^Approved save_evidence \(apr_/);
    expect(await resultOf(stack, callId)).toMatchObject({ ok: true, data: { stored: true } });
    expect(await mongo.db(`${stack.name}_tools`).collection("evidence").countDocuments({ task_id: "task_page", claim: CLAIM })).toBe(1);
    await expect.poll(() => row.count()).toBe(0);
    const granted = (await waitForCallEvents(stack, callId, (es) => es.some((e) => e.type === "approval_granted"))).find((e) => e.type === "approval_granted")!;
    expect(granted.payload.approver).toMatchObject({ tenant: "acme", subject: "carol" });
    await page.close();
  });

  it("does not let a credential without the right see or decide anything", async () => {
    const page = await browser.newPage();
    await page.goto(`${stack.policyUrl}/approvals`);
    await page.getByLabel("Approver credential (API key or JWT)").fill("tgk_not_a_real_key_0000000000");
    await page.getByRole("button", { name: "Sign in" }).click();
    await expect.poll(() => page.getByTestId("who").innerText()).toBe("That credential was not accepted.");
    expect(await page.locator("#queue").isHidden()).toBe(true);
    await page.getByLabel("Approver credential (API key or JWT)").fill(stack.apiKeys.bob);
    await page.getByRole("button", { name: "Sign in" }).click();
    await expect.poll(() => page.getByTestId("who").innerText()).toBe("signed in as acme/bob");
    await expect.poll(() => page.locator("#empty").isVisible()).toBe(true);
    expect(await page.locator("tbody tr").count()).toBe(0);
    await page.close();
  });
});
