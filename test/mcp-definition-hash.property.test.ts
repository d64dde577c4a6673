import { mcpDefinitionHash } from "@toolgate/registry";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { mcpDefinitionHash as executorDefinitionHash } from "../services/executor/src/transports/mcp-definition.js";

// Discovery pins what the executor will verify: both must hash a server's definition identically.
describe("the MCP definition hash", () => {
  it("is the same in the registry (discovery) and in the executor's MCP transport, for any definition", () => {
    const json = fc.jsonValue({ maxDepth: 3 });
    const definition = fc.record(
      {
        name: fc.string({ maxLength: 20 }),
        title: fc.string({ maxLength: 20 }),
        description: fc.string({ maxLength: 80, unit: "grapheme" }),
        inputSchema: fc.dictionary(fc.string({ maxLength: 8 }), json, { maxKeys: 4 }),
        outputSchema: fc.dictionary(fc.string({ maxLength: 8 }), json, { maxKeys: 4 }),
        annotations: fc.dictionary(fc.string({ maxLength: 8 }), fc.boolean(), { maxKeys: 3 }),
      },
      { requiredKeys: ["name", "inputSchema"] },
    );
    fc.assert(
      fc.property(definition, (tool) => {
        expect(mcpDefinitionHash(tool)).toBe(executorDefinitionHash(tool));
      }),
      { numRuns: 300 },
    );
  });
});
