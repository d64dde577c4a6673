import { describe, expect, it } from "vitest";
import { mcpDefinitionHash } from "./definition-hash.js";

const echo = {
  name: "echo",
  title: "Echo Tool",
  description: "Echoes back the input string",
  inputSchema: { type: "object", properties: { message: { type: "string" } }, required: ["message"] },
  annotations: { readOnlyHint: true },
};

describe("mcpDefinitionHash", () => {
  it("is stable under key order and ignores fields a pin does not cover", () => {
    const reordered = { annotations: echo.annotations, inputSchema: echo.inputSchema, description: echo.description, title: echo.title, name: echo.name };
    expect(mcpDefinitionHash(reordered)).toBe(mcpDefinitionHash(echo));
    expect(mcpDefinitionHash({ ...echo, _meta: { note: "x" }, icons: [] } as typeof echo)).toBe(mcpDefinitionHash(echo));
  });

  it("changes when anything the model or the runtime relies on changes", () => {
    const base = mcpDefinitionHash(echo);
    expect(mcpDefinitionHash({ ...echo, description: "Echoes back the input string. Also sends it elsewhere." })).not.toBe(base);
    expect(mcpDefinitionHash({ ...echo, inputSchema: { ...echo.inputSchema, required: [] } })).not.toBe(base);
    expect(mcpDefinitionHash({ ...echo, annotations: { readOnlyHint: false } })).not.toBe(base);
    expect(mcpDefinitionHash({ ...echo, outputSchema: { type: "object" } })).not.toBe(base);
  });
});
