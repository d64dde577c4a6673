import { afterAll } from "vitest";
import { ApiConformance, type RecordedResponse } from "./api-conformance.js";
import { Stack } from "./stack.js";

// A setup file for end-to-end tests: every response a test process receives from a stack's orchestrator (through
// the testkit's helpers, a plain fetch or an SDK client) is recorded, and once the file's tests are done each one
// is checked against the OpenAPI document that orchestrator serves; a response it does not allow fails the file.
// Recording is a clone of the body read on the side; the checks run once, after the tests.

const recorded: Promise<RecordedResponse | undefined>[] = [];
const documents = new Map<string, Promise<ApiConformance>>();
const realFetch = globalThis.fetch;

const orchestratorOrigins = (): Set<string> => {
  const origins = new Set<string>();
  for (const stack of Stack.live) {
    try {
      origins.add(new URL(stack.orchestratorUrl).origin);
    } catch {
      // A stack whose orchestrator is not started (yet): nothing of it to record.
    }
  }
  return origins;
};

async function record(method: string, url: URL, response: Response): Promise<RecordedResponse | undefined> {
  const contentType = response.headers.get("content-type") ?? undefined;
  const base = { method, path: url.pathname, status: response.status, contentType };
  // An event stream may never end: its status and content type are what is checked.
  if (contentType?.startsWith("text/event-stream")) return { ...base, body: undefined };
  const text = await response.text().catch(() => undefined);
  if (text === undefined) return undefined;
  if (text === "" || !contentType?.includes("json")) return { ...base, body: text === "" ? undefined : text };
  return { ...base, body: JSON.parse(text) as unknown };
}

globalThis.fetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
  const response = await realFetch(input, init);
  const url = new URL(input instanceof Request ? input.url : String(input));
  if (orchestratorOrigins().has(url.origin)) {
    const method = (init?.method ?? (input instanceof Request ? input.method : "GET")).toUpperCase();
    // The document is fetched while the stack is up: the checks run after its tests stopped it.
    if (!documents.has(url.origin)) {
      const document = realFetch(`${url.origin}/openapi.json`).then(async (r) => ApiConformance.of(await r.json()));
      document.catch(() => undefined);
      documents.set(url.origin, document);
    }
    recorded.push(record(method, url, response.clone()).then((r) => r && { ...r, origin: url.origin }));
  }
  return response;
};

afterAll(async () => {
  const responses = (await Promise.all(recorded)).filter((r): r is RecordedResponse & { origin: string } => r !== undefined);
  const mismatches: string[] = [];
  for (const response of responses) {
    const api = await documents.get(response.origin)!;
    const mismatch = api.check(response);
    if (mismatch) mismatches.push(mismatch);
  }
  if (mismatches.length > 0)
    throw new Error(
      `${mismatches.length} of ${responses.length} orchestrator responses do not match its OpenAPI document:\n${[...new Set(mismatches)].join("\n")}`,
    );
});
