import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Stack, testInfra } from "@toolgate/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// Any MCP host can use the registry's tools through Toolgate, with all of its checks in the path.
let stack: Stack;
let client: Client;

beforeAll(async () => {
  const infra = testInfra();
  stack = await Stack.start({ natsUrl: infra.natsUrl, mongoUrl: infra.mongoUrl });
  client = new Client({ name: "toolgate-e2e", version: "1.0.0" });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${stack.orchestratorUrl}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${stack.apiKeys.alice}` } },
    }),
  );
});

afterAll(async () => {
  await client?.close();
  await stack?.stop();
});

describe("MCP front door", () => {
  it("lists the registry's tools with their schemas and hints", async () => {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(["fetch_document", "save_evidence", "search_sources"]);
    const search = tools.find((t) => t.name === "search_sources")!;
    expect(search.inputSchema).toMatchObject({ type: "object", additionalProperties: false, required: ["query", "source_type", "limit"] });
    expect(search.annotations).toMatchObject({ readOnlyHint: true });
  });

  it("calls a tool through validation, policy and the executor", async () => {
    const result = await client.callTool({ name: "search_sources", arguments: { query: "OpenAI Agents SDK sessions", source_type: "official", limit: 2 } });
    expect(result.isError).toBe(false);
    const items = (result.structuredContent as { items: { source_type: string }[] }).items;
    expect(items.length).toBeGreaterThan(0);
    expect(items.every((i) => i.source_type === "official")).toBe(true);
  });

  it("answers bad arguments with INVALID_ARGUMENTS as a tool error", async () => {
    const result = await client.callTool({ name: "search_sources", arguments: { query: "sessions", source_type: "official", limit: 50 } });
    expect(result.isError).toBe(true);
    const text = (result.content as { type: string; text: string }[])[0]!.text;
    expect(JSON.parse(text)).toMatchObject({ ok: false, error: { code: "INVALID_ARGUMENTS", details: { violations: [{ pointer: "/limit" }] } } });
  });

  it("refuses an MCP client without credentials", async () => {
    const anonymous = new Client({ name: "anonymous", version: "1.0.0" });
    await expect(anonymous.connect(new StreamableHTTPClientTransport(new URL(`${stack.orchestratorUrl}/mcp`)))).rejects.toThrow();
  });
});
