import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Stack, resultOf, testInfra, waitForCallEvents } from "@toolgate/testkit";
import { MongoClient } from "mongodb";
import { chromium, type BrowserContext, type Locator, type Page, type Request } from "playwright-core";
import { REFUND } from "./fixtures/refund-contract.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// The approvers' web page in a real browser (Debian's headless Chromium driven by playwright-core): it shows a
// pending call with what an approver must see, Approve takes effect only once confirmed, sensitive arguments
// never reach the page, and the page stays readable from a desktop down to a 400 px phone screen.
const DOC = "https://example.test/docs/openai-agents-sdk/sessions";
const APPROVE_SAVES = `@id("test-approve-saves")
forbid (principal, action == Action::"call", resource == Tool::"save_evidence") when { !context.approved };
`;
// Markup from the model must show as text, never run; an invisible character must be pointed out.
const CLAIM = 'Sessions persist state <img src=x onerror="window.__pwned = true"> across\u200B runs.';
// Always UTC+05:30: a local time that is neither UTC nor a whole number of hours away from it.
const TIME_ZONE = "Asia/Kolkata";
const localTime = (iso: string) => {
  const shifted = new Date(Date.parse(iso) + 330 * 60_000).toISOString();
  return `${shifted.slice(0, 10)} ${shifted.slice(11, 19)} UTC+05:30`;
};

const SECRET_CARD = "4111111111111111";
const SECRET_TOKEN = "tok_live_9f8e7d6c5b4a3f2e";
// Long ordinary prose (it must wrap between words) and one long unbroken token (it must wrap anywhere).
const REASON =
  "The customer reports that the parcel arrived damaged and asks for the full amount back; support checked the photos and the courier's note. ".repeat(14);
const EVIDENCE_URL = `https://support.example.test/tickets/${"a1b2c3d4e5".repeat(12)}`;

let stack: Stack;
let mongo: MongoClient;
let browser: BrowserContext;
let profile: string;
const shots = process.env.TOOLGATE_SCREENSHOT_DIR ?? mkdtempSync(join(tmpdir(), "tg-approval-shots-"));

beforeAll(async () => {
  const infra = testInfra();
  stack = await Stack.start({ natsUrl: infra.natsUrl, mongoUrl: infra.mongoUrl, policyFiles: { "approve-test.cedar": APPROVE_SAVES } });
  mongo = await new MongoClient(infra.mongoUrl).connect();
  expect(await stack.publishContract(REFUND)).toMatchObject({ ok: true });
  mkdirSync(shots, { recursive: true });
  profile = mkdtempSync(join(tmpdir(), "tg-chromium-"));
  browser = await chromium.launchPersistentContext(profile, {
    executablePath: "/usr/bin/chromium",
    headless: true,
    timezoneId: TIME_ZONE,
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

/** Proposes one call as alice and returns its id once policy has asked for approval. */
async function pendingCall(name: string, args: Record<string, unknown>, taskId = "task_page") {
  const body = { context: { task_id: taskId }, calls: [{ id: "h1", name, arguments: args }], wait_ms: 0 };
  const submitted = await stack.api<{ results: { call_id: string }[] }>("POST", "/v1/tool-calls", body);
  const callId = submitted.body.results[0]!.call_id;
  const events = await waitForCallEvents(stack, callId, (es) => es.some((e) => e.type === "approval_requested"));
  const requested = events.find((e) => e.type === "approval_requested")!;
  const approvalId = requested.payload.approval_id as string;
  const view = await stack.policyApi<{ approval: { run_id: string; requested_at: string; expires_at: string; plan_hash: string } }>(
    "GET",
    `/v1/approvals/${approvalId}`,
  );
  return { callId, approvalId, view: view.body.approval };
}

/** Opens the page as carol; `problems` collects console errors (a Content-Security-Policy violation is one). */
async function signedInPage(path = "/approvals"): Promise<{ page: Page; problems: string[]; posts: Request[] }> {
  const page = await browser.newPage();
  const problems: string[] = [];
  const posts: Request[] = [];
  page.on("console", (message) => {
    if (message.type() === "error") problems.push(message.text());
  });
  page.on("pageerror", (error) => problems.push(error.message));
  page.on("request", (request) => {
    if (request.method() === "POST") posts.push(request);
  });
  const response = await page.goto(`${stack.policyUrl}${path}`);
  expect(response!.status()).toBe(200);
  expect(response!.headers()["content-security-policy"]).toBe(
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'",
  );
  await page.getByLabel("Approver credential (API key or JWT)").fill(stack.apiKeys.carol);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect.poll(() => page.getByTestId("who").innerText()).toBe("signed in as acme/carol");
  return { page, problems, posts };
}

const field = (card: Locator, name: string) => card.locator(`[data-field="${name}"]`);
const approvalState = async (approvalId: string) =>
  (await stack.policyApi<{ approval: { state: string } }>("GET", `/v1/approvals/${approvalId}`)).body.approval.state;
const isListRefresh = (response: { url(): string; request(): Request }) =>
  response.request().method() === "GET" && new URL(response.url()).pathname === "/v1/approvals";

// The tests compile without the DOM library: what runs in the page is typed by the little it uses.
interface Scrollable {
  scrollWidth: number;
  clientWidth: number;
  scrollHeight: number;
  clientHeight: number;
  scrollTop: number;
}
interface TextHolder {
  textContent: string | null;
  firstChild: unknown;
}
interface WordRange {
  setStart(node: unknown, offset: number): void;
  setEnd(node: unknown, offset: number): void;
  getClientRects(): ArrayLike<{ top: number }>;
}
interface ArgumentsBox {
  querySelectorAll(selector: string): ArrayLike<TextHolder>;
  ownerDocument: { createRange(): WordRange };
}

/** How far the page is wider than its window (0: no horizontal scrolling). */
const horizontalOverflow = (page: Page) => page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth");

/** Words of `text` (at most 20 characters, so each fits on a line) that the browser split over two lines. */
async function brokenWords(pre: Locator, text: string): Promise<string[]> {
  return pre.evaluate((node: ArgumentsBox, wanted: string) => {
    const span = Array.from(node.querySelectorAll("span")).find((s) => s.textContent === JSON.stringify(wanted));
    if (!span?.textContent) return ["<text not found>"];
    const broken: string[] = [];
    for (const match of span.textContent.matchAll(/\S+/g)) {
      if (match[0].length > 20) continue;
      const range = node.ownerDocument.createRange();
      range.setStart(span.firstChild, match.index);
      range.setEnd(span.firstChild, match.index + match[0].length);
      if (new Set(Array.from(range.getClientRects()).map((r) => Math.round(r.top))).size > 1) broken.push(match[0]);
    }
    return broken;
  }, text);
}

describe("the approval page", () => {
  it("shows a pending call with its ids, requester, local times and countdown, and Approve takes effect only once confirmed", async () => {
    const args = { task_id: "task_page", claim: CLAIM, source_url: DOC };
    const { callId, approvalId, view } = await pendingCall("save_evidence", args);
    const { page, problems, posts } = await signedInPage();

    const card = page.locator(`article[data-call-id="${callId}"]`);
    await card.waitFor();
    expect(await card.getByRole("heading", { level: 2 }).innerText()).toBe("save_evidence@1.1.0");
    expect(await card.locator(".risk-medium").innerText()).toBe("medium risk");
    expect(await field(card, "requester").innerText()).toBe("acme/alice");
    expect(await field(card, "call-id").innerText()).toBe(callId);
    expect(await field(card, "run-id").innerText()).toBe(view.run_id);
    expect(await field(card, "approval-id").innerText()).toBe(approvalId);
    expect(await field(card, "plan-hash").innerText()).toBe(view.plan_hash);
    // Times in the browser's zone, the UTC instant kept in the <time> element.
    expect(await field(card, "requested-at").locator("time").innerText()).toBe(localTime(view.requested_at));
    expect(await field(card, "expires-at").locator("time").innerText()).toBe(localTime(view.expires_at));
    expect(await field(card, "expires-at").locator("time").getAttribute("datetime")).toBe(view.expires_at);
    const countdown = field(card, "countdown");
    const first = await countdown.innerText();
    const [, minutes, seconds] = /^in (\d+) min (\d+) s$/.exec(first) ?? [];
    expect(Math.abs(Number(minutes) * 60 + Number(seconds) - (Date.parse(view.expires_at) - Date.now()) / 1000)).toBeLessThan(3);
    await expect.poll(() => countdown.innerText(), { timeout: 5_000 }).not.toBe(first);

    // The normalized arguments (RFC 8785: keys sorted), the text exactly as the model wrote it.
    const shown = card.getByTestId("arguments");
    expect(await shown.innerText()).toBe(JSON.stringify({ claim: CLAIM, source_url: DOC, task_id: "task_page" }, null, 2));
    expect(await card.innerText()).toContain("/claim contains invisible or direction-changing characters");
    expect(await page.locator("img").count()).toBe(0);
    expect(await page.evaluate("typeof window.__pwned")).toBe("undefined");
    // The credential is not left in the form.
    expect(await page.locator("#credential").inputValue()).toBe("");

    // Approve asks first, and sends nothing; the question has focus, not the button that would confirm.
    await card.getByLabel(`note for ${approvalId}`).fill("checked the source");
    await card.getByRole("button", { name: "Approve", exact: true }).click();
    const confirmation = card.getByRole("group", { name: /^Approve this call\?/ });
    await confirmation.waitFor();
    expect(await confirmation.innerText()).toContain(
      `save_evidence@1.1.0 will run for acme/alice with exactly the arguments shown (plan hash ${view.plan_hash.slice(0, 19)}…)`,
    );
    expect(await confirmation.innerText()).toContain("⚠ 1 warning(s) about the arguments above.");
    expect(await page.evaluate("document.activeElement && document.activeElement.id")).toBe(`confirm-${approvalId}`);
    expect(posts).toHaveLength(0);
    expect(await approvalState(approvalId)).toBe("pending");
    // The page's periodic refresh keeps an open confirmation and the note being typed.
    await page.waitForResponse(isListRefresh);
    expect(await confirmation.isVisible()).toBe(true);
    expect(await card.getByLabel(`note for ${approvalId}`).inputValue()).toBe("checked the source");
    // Cancel closes it, still without a decision.
    await confirmation.getByRole("button", { name: "Cancel" }).click();
    expect(await confirmation.isHidden()).toBe(true);
    expect(posts).toHaveLength(0);
    expect(await approvalState(approvalId)).toBe("pending");

    await card.getByRole("button", { name: "Approve", exact: true }).click();
    await confirmation.getByRole("button", { name: "Confirm approval" }).click();
    await expect.poll(() => page.getByTestId("status").innerText()).toBe(`Approved save_evidence (${approvalId})`);
    // One decision, bound to the plan hash the approver was shown, as before the confirmation step existed.
    expect(posts.map((p) => [new URL(p.url()).pathname, p.postDataJSON() as unknown])).toEqual([
      [`/v1/approvals/${approvalId}/approve`, { plan_hash: view.plan_hash, reason: "checked the source" }],
    ]);
    expect(await resultOf(stack, callId)).toMatchObject({ ok: true, data: { stored: true } });
    expect(await mongo.db(`${stack.name}_tools`).collection("evidence").countDocuments({ task_id: "task_page", claim: CLAIM })).toBe(1);
    await expect.poll(() => card.count()).toBe(0);
    const granted = (await waitForCallEvents(stack, callId, (es) => es.some((e) => e.type === "approval_granted"))).find((e) => e.type === "approval_granted")!;
    expect(granted.payload.approver).toMatchObject({ tenant: "acme", subject: "carol" });
    expect(problems).toEqual([]);
    await page.close();
  });

  it("masks sensitive arguments and stays readable at 1280 and 400 px (screenshots), and Deny ends the call", async () => {
    const args = {
      order_id: "ord_7731",
      amount_cents: 12_999,
      card_number: SECRET_CARD,
      auth: { account: "acct_acme_eu", token: SECRET_TOKEN },
      reason: REASON,
      evidence_url: EVIDENCE_URL,
    };
    const { callId, approvalId, view } = await pendingCall("issue_refund", args);
    const { page, problems, posts } = await signedInPage();
    const card = page.locator(`article[data-call-id="${callId}"]`);
    await card.waitFor();

    // The secrets reach neither the page's data nor its document; their places are shown as hidden.
    const listed = await page.waitForResponse(isListRefresh);
    expect(await listed.text()).not.toMatch(new RegExp(`${SECRET_CARD}|${SECRET_TOKEN}`));
    const html = await page.content();
    const text = await page.locator("body").innerText();
    for (const secret of [SECRET_CARD, SECRET_TOKEN]) {
      expect(html).not.toContain(secret);
      expect(text).not.toContain(secret);
    }
    const shown = card.getByTestId("arguments");
    expect(await shown.locator(".masked").allInnerTexts()).toEqual(["hidden: sensitive", "hidden: sensitive"]);
    expect(await card.innerText()).toContain("Hidden because the tool's contract marks them sensitive: /auth/token, /card_number");
    expect(await shown.innerText()).toContain('"account": "acct_acme_eu"');
    expect(await shown.innerText()).toContain('"amount_cents": 12999');

    for (const width of [1280, 400]) {
      await page.setViewportSize({ width, height: 900 });
      // Nothing sticks out of the window: no horizontal scrolling, every fact and control inside the width.
      expect(await horizontalOverflow(page)).toBe(0);
      for (const name of ["requester", "requested-at", "expires-at", "countdown", "call-id", "run-id", "approval-id", "plan-hash"]) {
        const box = (await field(card, name).boundingBox())!;
        expect(box, name).not.toBeNull();
        expect(await field(card, name).isVisible(), name).toBe(true);
        expect(box.x, name).toBeGreaterThanOrEqual(0);
        expect(box.x + box.width, name).toBeLessThanOrEqual(width);
      }
      expect(await field(card, "call-id").innerText()).toBe(callId);
      expect(await field(card, "run-id").innerText()).toBe(view.run_id);
      expect(await field(card, "expires-at").locator("time").innerText()).toBe(localTime(view.expires_at));
      for (const button of ["Approve", "Deny"]) {
        const box = (await card.getByRole("button", { name: button, exact: true }).boundingBox())!;
        expect(box.x + box.width, button).toBeLessThanOrEqual(width);
      }
      await shown.evaluate((node: Scrollable) => (node.scrollTop = 0));
      const path = join(shots, `approval-page-${width}.png`);
      await page.screenshot({ path, fullPage: true });
      // A PNG's width is at byte 16 of its header: a full-page shot wider than the window would mean overflow.
      expect(readFileSync(path).readUInt32BE(16)).toBe(width);
      // The arguments wrap (prose between words, the long token anywhere) instead of scrolling sideways, and
      // scroll vertically with the wheel when they are longer than the box.
      const pre = (await shown.boundingBox())!;
      expect(pre.x + pre.width).toBeLessThanOrEqual(width);
      expect(await shown.evaluate((node: Scrollable) => node.scrollWidth - node.clientWidth)).toBe(0);
      expect(await brokenWords(shown, REASON)).toEqual([]);
      expect(await shown.evaluate((node: Scrollable) => node.scrollHeight > node.clientHeight)).toBe(true);
      await shown.hover();
      await page.mouse.wheel(0, 600);
      await expect.poll(() => shown.evaluate((node: Scrollable) => node.scrollTop)).toBeGreaterThan(0);
      // Facts beside the arguments on a wide screen, above them on a narrow one.
      const facts = (await card.locator("dl.facts").boundingBox())!;
      const argsBox = (await card.locator("section.args").boundingBox())!;
      if (width === 1280) {
        expect(argsBox.x).toBeGreaterThanOrEqual(facts.x + facts.width);
        expect(argsBox.y).toBeLessThan(facts.y + facts.height);
      } else {
        expect(argsBox.y).toBeGreaterThanOrEqual(facts.y + facts.height);
      }
    }

    // At 400 px the confirmation fits too; cancelled here, the call is denied, which needs no confirmation.
    await card.getByRole("button", { name: "Approve", exact: true }).click();
    const confirmation = card.getByRole("group", { name: /^Approve this call\?/ });
    await confirmation.waitFor();
    expect(await horizontalOverflow(page)).toBe(0);
    await confirmation.screenshot({ path: join(shots, "approval-page-400-confirm.png") });
    await confirmation.getByRole("button", { name: "Cancel" }).click();
    expect(posts).toHaveLength(0);
    await card.getByRole("button", { name: "Deny", exact: true }).click();
    await expect.poll(() => page.getByTestId("status").innerText()).toBe(`Denied issue_refund (${approvalId})`);
    expect(await resultOf(stack, callId)).toMatchObject({ ok: false, error: { code: "APPROVAL_DENIED" } });
    expect(posts.map((p) => p.postDataJSON() as unknown)).toEqual([{ plan_hash: view.plan_hash }]);
    expect(problems).toEqual([]);
    await page.close();
  });

  it("opens the approval its link names (?approval_id=&call_id=), and says when that request can no longer be decided", async () => {
    // Two tasks: saves to one task run one after another, and the first would wait for a human meanwhile.
    const other = await pendingCall("save_evidence", { task_id: "task_link_a", claim: "Another claim.", source_url: DOC }, "task_link_a");
    const linked = await pendingCall("save_evidence", { task_id: "task_link_b", claim: "The linked claim.", source_url: DOC }, "task_link_b");
    const link = `/approvals?approval_id=${linked.approvalId}&call_id=${linked.callId}`;
    const { page, problems } = await signedInPage(link);
    const card = page.locator(`article[data-approval-id="${linked.approvalId}"]`);
    await card.waitFor();
    // Only that request, though another one waits for the same approver; the way back to the queue is named.
    expect(await page.locator("article.approval").count()).toBe(1);
    expect(await page.locator(`article[data-approval-id="${other.approvalId}"]`).count()).toBe(0);
    expect(await page.getByTestId("linked").innerText()).toContain("The approval this link names:");
    expect(await page.getByRole("link", { name: "All pending approvals" }).getAttribute("href")).toBe("/approvals");
    expect(await page.locator("#empty").isHidden()).toBe(true);

    // Decided meanwhile (here: denied by another approver's API call): the page says so and offers nothing to click.
    expect((await stack.policyApi("POST", `/v1/approvals/${linked.approvalId}/deny`, {})).status).toBe(200);
    await page.getByRole("button", { name: "Refresh" }).click();
    await expect
      .poll(() => page.getByTestId("linked").innerText())
      .toContain(`Approval ${linked.approvalId} of save_evidence (call ${linked.callId}) can no longer be decided: it was denied.`);
    expect(await page.locator("article.approval").count()).toBe(0);

    // A link whose call is not the approval's, or an approval that does not exist, opens nothing.
    await page.goto(`${stack.policyUrl}/approvals?approval_id=${other.approvalId}&call_id=${linked.callId}`);
    await expect
      .poll(() => page.getByTestId("linked").innerText())
      .toContain(`This link names call ${linked.callId}, but approval ${other.approvalId} is of call ${other.callId}`);
    expect(await page.locator("article.approval").count()).toBe(0);
    await page.goto(`${stack.policyUrl}/approvals?approval_id=apr_01ZZZZZZZZZZZZZZZZZZZZZZZZ`);
    await expect.poll(() => page.getByTestId("linked").innerText()).toContain("There is no approval apr_01ZZZZZZZZZZZZZZZZZZZZZZZZ that you may decide.");
    // The queue itself still lists the other request.
    await page.getByRole("link", { name: "All pending approvals" }).click();
    await page.locator(`article[data-approval-id="${other.approvalId}"]`).waitFor();
    expect(await page.getByTestId("linked").isHidden()).toBe(true);
    // The browser reports the unknown approval's 404 itself; nothing else went wrong.
    expect(problems).toEqual(["Failed to load resource: the server responded with a status of 404 (Not Found)"]);
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
    expect(await page.locator("article.approval").count()).toBe(0);
    await page.close();
  });
});
