import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import { lintContract, mcpDefinitionHash, ToolContractSchema } from "@toolgate/registry";
import { describe, expect, it } from "vitest";
import { contractName, draftContract } from "./discover.js";

const readOnly: Tool = {
  name: "getWeather",
  description: "Current weather for a city. Use it when asked about the weather; do not use it for forecasts.",
  inputSchema: { type: "object", properties: { city: { type: "string", maxLength: 64 } }, required: ["city"], additionalProperties: false },
  annotations: { readOnlyHint: true },
};

describe("contractName", () => {
  it("makes a lower snake_case name of the server and the tool, at most 64 characters", () => {
    expect(contractName("shop", "lookup_order")).toBe("shop_lookup_order");
    expect(contractName("weather-eu", "getWeather")).toBe("weather_eu_get_weather");
    expect(contractName("files", "read.file > all")).toBe("files_read_file_all");
    expect(contractName("x", "9lives")).toBe("x_9lives");
    const long = contractName("files", "a".repeat(100));
    expect(long.length).toBeLessThanOrEqual(64);
    for (const name of ["shop_lookup_order", long]) expect(ToolContractSchema.shape.name.safeParse(name).success).toBe(true);
  });
});

describe("draftContract", () => {
  it("keeps the server's text verbatim and pins the definition hash", () => {
    const hash = mcpDefinitionHash(readOnly);
    const draft = draftContract("weather", readOnly, hash);
    expect(draft).toMatchObject({
      name: "weather_get_weather",
      description: readOnly.description,
      input_schema: readOnly.inputSchema,
      side_effect: "read",
      risk: "low",
      approval: "never",
      untrusted_output: true,
      transport: { kind: "mcp", server: "weather", tool: "getWeather", definition_hash: hash },
    });
    expect(ToolContractSchema.safeParse(draft).success).toBe(true);
  });

  it("treats a tool that does not say it is read-only as a write that needs approval", () => {
    const write = draftContract("shop", { ...readOnly, annotations: {} }, mcpDefinitionHash(readOnly));
    expect(write).toMatchObject({ side_effect: "write", risk: "medium", approval: "always", idempotency: { kind: "keyed" } });
    const destructive = draftContract("shop", { ...readOnly, annotations: { destructiveHint: true, idempotentHint: true } }, mcpDefinitionHash(readOnly));
    expect(destructive).toMatchObject({ risk: "high", approval: "always", idempotency: { kind: "natural" } });
    expect(lintContract(write).findings.filter((f) => f.rule === "write-without-idempotency" || f.rule === "consequential-without-approval")).toEqual([]);
  });

  it("drops a foreign $schema dialect and pads a description too short for a contract", () => {
    const tool: Tool = { name: "ping", description: "Pings.", inputSchema: { type: "object", $schema: "http://json-schema.org/draft-07/schema#" } };
    const draft = draftContract("net", tool, mcpDefinitionHash(tool));
    expect(draft.input_schema).toEqual({ type: "object" });
    expect(draft.description).toBe("Pings. (MCP tool ping of server net)");
  });
});
