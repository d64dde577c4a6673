import { newRunId, success } from "@toolgate/contracts";
import { importTools } from "@toolgate/providers";
import { ToolRegistry } from "@toolgate/registry";
import { describe, expect, it } from "vitest";
import type { CallResultRecord, RunRecord } from "./run-store.js";
import { transcriptOf } from "./transcript.js";

const callId = "call_01M8KHXH7NQ308R8J60HB476AB";

function importedWeather(untrusted: boolean): ToolRegistry {
  const imported = importTools("openai-chat", [
    {
      type: "function",
      function: { name: "GetWeather", description: "Get the current weather conditions for a given location.", parameters: { type: "object", properties: {} } },
    },
  ]);
  if (!imported.ok) throw new Error(imported.error.message);
  return ToolRegistry.from([{ ...imported.tools[0]!.contract, version: "1.2.0", untrusted_output: untrusted }]);
}

function run(): RunRecord {
  return {
    _id: newRunId(),
    principal: { tenant: "t", subject: "s", roles: [] },
    model: "scripted:c04",
    context: {},
    input: "weather?",
    status: "running",
    turn: 1,
    awaiting: "model",
    responses: [{ turn: 0, response: { kind: "tool_calls", calls: [{ id: "g1", name: "GetWeather", arguments: "{}" }] }, call_ids: [callId] }],
    tool_calls: 1,
    budgets: { max_turns: 10, max_tool_calls: 10, max_wall_clock_ms: 1000, max_tokens: 1000, max_identical_calls: 3, max_approval_wait_ms: 1000 },
    usage: { turns: 1, tool_calls: 1, tokens: 0, signatures: {} },
    created_at: new Date(),
    updated_at: new Date(),
  };
}

const result: CallResultRecord = {
  _id: callId,
  run_id: "run_x",
  turn: 0,
  provider_call_id: "g1",
  tool_name: "GetWeather",
  terminal: "completed",
  result: success(callId, { temperature: 21 }),
  attached_at: new Date(),
};

describe("transcriptOf with a tool called by its original name", () => {
  it("answers under the name the model used, with the provenance of the contract that alias names", () => {
    for (const untrusted of [false, true]) {
      const item = transcriptOf(run(), [result], importedWeather(untrusted))[2]!;
      if (item.role !== "tool") throw new Error("expected a tool item");
      expect(item.name).toBe("GetWeather");
      expect(item.call_id).toBe("g1");
      const wrapped = JSON.parse(item.content) as { toolgate_observation: Record<string, unknown> };
      // Not the "unknown tool" fallback (version unknown, untrusted): the alias resolved to the contract.
      expect(wrapped.toolgate_observation).toMatchObject({ tool: "GetWeather", contract_version: "1.2.0", untrusted });
    }
  });
});
