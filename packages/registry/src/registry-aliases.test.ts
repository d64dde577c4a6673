import { describe, expect, it } from "vitest";
import { contractHash, ToolContractSchema, type ToolContractInput } from "./contract.js";
import { ContractCompiler, ContractError, ToolRegistry } from "./registry.js";

const uberRide: ToolContractInput = {
  name: "uber_ride",
  aliases: ["uber.ride"],
  version: "1.0.0",
  description: "Finds an Uber ride. Use it when the user asks for a ride; do not use it to pay for one.",
  owner: "tests",
  input_schema: { type: "object", properties: { loc: { type: "string", maxLength: 80 } }, required: ["loc"], additionalProperties: false },
  output_schema: {},
  side_effect: "read",
  risk: "low",
  timeout_ms: 1000,
  idempotency: { kind: "natural" },
};
const weather: ToolContractInput = { ...uberRide, name: "get_weather", aliases: ["GetWeather", "get weather"] };

describe("aliases", () => {
  it("a tool is found by its name or by any of its aliases, and is always the same compiled contract", () => {
    const registry = ToolRegistry.from([uberRide, weather]);
    const tool = registry.get("uber_ride")!;
    expect(registry.get("uber.ride")).toBe(tool);
    expect(registry.get("GetWeather")!.contract.name).toBe("get_weather");
    expect(registry.get("get weather")).toBe(registry.get("get_weather"));
    // Only the exact alias: no case folding, no punctuation folding.
    expect(registry.get("Uber.Ride")).toBeUndefined();
    expect(registry.get("uber ride")).toBeUndefined();
    expect(registry.list().map((t) => t.contract.name)).toEqual(["uber_ride", "get_weather"]);
  });

  it("refuses an alias that is another tool's name or alias", () => {
    expect(() => ToolRegistry.from([uberRide, { ...weather, aliases: ["uber_ride"] }])).toThrow(ContractError);
    expect(() => ToolRegistry.from([uberRide, { ...weather, aliases: ["uber.ride"] }])).toThrow(/uber\.ride/);
    expect(() => ToolRegistry.from([uberRide, { ...weather, name: "uber_ride", aliases: [] }])).toThrow(/duplicate tool name/);
  });

  it("from compiled tools (the catalog's snapshots), an ambiguous alias names no tool instead of failing the build", () => {
    const compiler = new ContractCompiler();
    const other = { ...weather, name: "book_ride", aliases: ["uber.ride", "uber_ride", "BookRide"] };
    const registry = ToolRegistry.fromCompiled([compiler.compile(uberRide), compiler.compile(other)]);
    expect(registry.get("uber.ride")).toBeUndefined();
    // A name always wins over an alias; an alias nobody else claims still resolves.
    expect(registry.get("uber_ride")!.contract.name).toBe("uber_ride");
    expect(registry.get("BookRide")!.contract.name).toBe("book_ride");
  });

  it("is hashed only when set, so contracts without aliases keep their hash", () => {
    const { aliases: _aliases, ...without } = uberRide;
    const plain = ToolContractSchema.parse(without);
    expect(plain.aliases).toEqual([]);
    const { aliases: _dropped, ...asBefore } = plain;
    expect(contractHash(plain)).toBe(contractHash(asBefore as typeof plain));
    expect(contractHash(ToolContractSchema.parse(uberRide))).not.toBe(contractHash(plain));
  });

  it("refuses aliases with control characters", () => {
    expect(ToolContractSchema.safeParse({ ...uberRide, aliases: ["uber\nride"] }).success).toBe(false);
  });
});
