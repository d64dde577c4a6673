import { defineTool, type ToolContractInput, type ToolDefinition } from "@toolgate/registry";

/**
 * The fixture tools the MCP conformance suite (`@modelcontextprotocol/conformance`, server scenarios) calls by
 * name, as Toolgate contracts: each call goes through validation, policy and the executor like any other, so
 * the suite checks the front door over the real path. Only the fixtures a Toolgate tool can honour are here
 * (see `test/fixtures/mcp-conformance-expected-failures.yml` for the others and why).
 */
const noArguments = { type: "object", properties: {}, additionalProperties: false } as const;
const textOutput = {
  type: "object",
  properties: { text: { type: "string", maxLength: 200 } },
  required: ["text"],
  additionalProperties: false,
} as const;

function fixture(name: string, description: string): ToolContractInput {
  return {
    name,
    version: "1.0.0",
    description: `MCP conformance fixture: ${description} Use only in the conformance suite; never for real work.`,
    owner: "toolgate",
    input_schema: noArguments,
    output_schema: textOutput,
    side_effect: "none",
    risk: "low",
    timeout_ms: 5_000,
    idempotency: { kind: "natural" },
  };
}

const simpleText = fixture("test_simple_text", "answers with a short text.");
const errorHandling = fixture("test_error_handling", "always fails with EXECUTION_ERROR.");
const withLogging = fixture("test_tool_with_logging", "answers after a short pause (the front door logs the call's progress).");
const withProgress = fixture("test_tool_with_progress", "answers after a short pause (the front door reports the call's progress).");

/** Contracts of the conformance fixtures. */
export const conformanceContracts: ToolContractInput[] = [simpleText, errorHandling, withLogging, withProgress];

const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** The conformance fixtures' implementations. */
export function conformanceTools(): ToolDefinition[] {
  return [
    defineTool(simpleText, () => Promise.resolve({ ok: true, data: { text: "This is a simple text response for testing." } })),
    defineTool(errorHandling, () => Promise.resolve({ ok: false, code: "EXECUTION_ERROR", message: "This tool intentionally returns an error for testing" })),
    defineTool(withLogging, async () => {
      await pause(100);
      return { ok: true, data: { text: "Tool with logging executed successfully" } };
    }),
    defineTool(withProgress, async () => {
      await pause(100);
      return { ok: true, data: { text: "Tool with progress executed successfully" } };
    }),
  ];
}
