import { createServer, type IncomingMessage, type Server } from "node:http";
import { importTools, type ImportedTool } from "@toolgate/providers";
import type { ToolContractInput } from "@toolgate/registry";
import { Stack, testInfra, waitForCallEvents } from "@toolgate/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// A tool imported from an OpenAI-style definition named `GetWeather`, completed by its owner and published to
// the catalog, runs end to end: a host's model calls it by the original name, the four services run it as
// `get_weather` behind HTTP, and the result goes back under the name the model used.

const WEATHER_ORIGIN = "http://weather.toolgate.test";

let stack: Stack;
let far: Server;
const requests: { arguments: Record<string, unknown>; key: string | undefined }[] = [];

async function readBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

function startWeatherService(): Promise<number> {
  far = createServer((req, res) => {
    void readBody(req).then((body) => {
      const { arguments: args } = body as { arguments: Record<string, unknown> };
      requests.push({ arguments: args, key: req.headers["idempotency-key"] as string | undefined });
      res
        .writeHead(200, { "content-type": "application/json" })
        .end(JSON.stringify({ location: args.location, temperature: 21, unit: args.unit ?? "celsius" }));
    });
  });
  return new Promise((resolve) => far.listen(0, "127.0.0.1", () => resolve((far.address() as { port: number }).port)));
}

const GET_WEATHER = {
  type: "function",
  function: {
    name: "GetWeather",
    description: "Get the current weather conditions for a given location.",
    parameters: {
      type: "object",
      properties: {
        location: { type: "string", description: "The city and state, e.g. San Francisco, CA" },
        unit: { type: "string", enum: ["celsius", "fahrenheit"] },
      },
      required: ["location"],
    },
  },
};

/** The draft as its owner completes it: a reviewed read behind HTTP. The input schema stays as imported (open). */
function completed(tool: ImportedTool): ToolContractInput {
  return {
    ...tool.contract,
    version: "1.0.0",
    owner: "weather-team",
    description: "Gets the current weather for a location. Use it when the user asks about the weather; do not use it for forecasts.",
    output_schema: { type: "object" },
    side_effect: "read",
    risk: "low",
    approval: "never",
    idempotency: { kind: "natural" },
    timeout_ms: 5_000,
    transport: { kind: "http", url: `${WEATHER_ORIGIN}/weather`, method: "POST" },
  };
}

let imported: ImportedTool;

beforeAll(async () => {
  const port = await startWeatherService();
  const infra = testInfra();
  stack = await Stack.start({
    natsUrl: infra.natsUrl,
    mongoUrl: infra.mongoUrl,
    // The executor builds its HTTP transport only when a tool set it starts with has an HTTP tool (the chaos
    // set does); a tool that arrives later through the catalog then runs on it.
    toolsets: ["research", "chaos"],
    env: { executor: { EXECUTOR_HTTP_ENDPOINTS: JSON.stringify({ [WEATHER_ORIGIN]: `http://127.0.0.1:${port}` }) } },
  });
  const result = importTools("openai-chat", [GET_WEATHER]);
  if (!result.ok) throw new Error(result.error.message);
  imported = result.tools[0]!;
  expect(await stack.publishContract(completed(imported))).toMatchObject({ ok: true, created: true });
});

afterAll(async () => {
  await stack?.stop();
  await new Promise((resolve) => far?.close(resolve));
});

describe("an imported tool, end to end", () => {
  it("is offered under its safe name in every provider's format", async () => {
    expect(imported).toMatchObject({ name: "get_weather", original_name: "GetWeather", contract: { aliases: ["GetWeather"] } });
    const chat = await stack.api<{ tools: { function: { name: string; strict: boolean; parameters: Record<string, unknown> } }[] }>(
      "GET",
      "/v1/tools?format=openai-chat",
    );
    const offered = chat.body.tools.find((t) => t.function.name === "get_weather")!;
    // Shown closed, as enforced; not strict only because `unit` is optional.
    expect(offered.function.parameters).toMatchObject({ additionalProperties: false });
    expect(offered.function.strict).toBe(false);
    const gemini = await stack.api<{ tools: { name: string }[] }>("GET", "/v1/tools?format=gemini");
    expect(gemini.body.tools.map((t) => t.name)).toContain("get_weather");
  });

  it("a Gemini call by the original name runs the tool and is answered under that name", async () => {
    const response = {
      candidates: [
        { content: { role: "model", parts: [{ functionCall: { id: "fc_weather", name: "GetWeather", args: { location: "Boston, MA", unit: "celsius" } } }] } },
      ],
    };
    const { status, body } = await stack.api<{
      complete: boolean;
      calls: { id: string; call_id: string }[];
      results: { functionResponse: { id?: string; name: string; response: Record<string, unknown> } }[];
    }>("POST", "/v1/providers/gemini/tool-calls", { response, wait_ms: 30_000 });
    expect(status).toBe(200);
    expect(body.results).toHaveLength(1);
    expect(body.results[0]!.functionResponse).toMatchObject({
      id: "fc_weather",
      name: "GetWeather",
      response: { output: { location: "Boston, MA", temperature: 21, unit: "celsius" } },
    });
    expect(requests.filter((r) => r.arguments.location === "Boston, MA")).toHaveLength(1);
    // Policy authorized, and the executor ran, the contract itself: its own name, version and hash.
    const callId = body.calls[0]!.call_id;
    const events = await waitForCallEvents(stack, callId, (es) => es.some((e) => e.type === "result_attached"));
    const authorized = events.find((e) => e.type === "authorized")!;
    expect((authorized.payload.decision as { tool: { name: string; version: string } }).tool).toMatchObject({ name: "get_weather", version: "1.0.0" });
  });

  it("refuses an unknown field before anything runs, and answers every call under the name used", async () => {
    const before = requests.length;
    const completion = {
      choices: [
        {
          message: {
            role: "assistant",
            tool_calls: [
              { id: "call_force", type: "function", function: { name: "GetWeather", arguments: JSON.stringify({ location: "Paris", force: true }) } },
              { id: "call_ok", type: "function", function: { name: "GetWeather", arguments: JSON.stringify({ location: "Lyon" }) } },
            ],
          },
        },
      ],
    };
    const { status, body } = await stack.api<{ results: { role: string; tool_call_id: string; content: string }[] }>(
      "POST",
      "/v1/providers/openai-chat/tool-calls",
      { response: completion, wait_ms: 30_000 },
    );
    expect(status).toBe(200);
    expect(body.results.map((r) => r.tool_call_id)).toEqual(["call_force", "call_ok"]);
    const refused = JSON.parse(body.results[0]!.content) as { toolgate_observation: { tool: string }; result: Record<string, unknown> };
    expect(refused.toolgate_observation.tool).toBe("GetWeather");
    expect(refused.result).toMatchObject({
      ok: false,
      error: { code: "INVALID_ARGUMENTS", details: { violations: [expect.objectContaining({ pointer: "/force" })] } },
    });
    expect(JSON.parse(body.results[1]!.content)).toMatchObject({ result: { ok: true, data: { location: "Lyon" } } });
    // Only the valid call reached the far side.
    expect(requests.slice(before).map((r) => r.arguments)).toEqual([{ location: "Lyon" }]);
  });
});
