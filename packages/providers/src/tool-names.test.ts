import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { isSafeToolName, nameSuffix, PROVIDER_NAME_RULES, safeToolNames, snakeToolName } from "./tool-names.js";

describe("safe tool names", () => {
  it("turns provider names into snake_case", () => {
    expect(snakeToolName("uber.ride")).toBe("uber_ride");
    expect(snakeToolName("GetWeather")).toBe("get_weather");
    expect(snakeToolName("HTTPRequest")).toBe("http_request");
    expect(snakeToolName("get  weather > now*")).toBe("get_weather_now");
    expect(snakeToolName("Crème brûlée")).toBe("creme_brulee");
    expect(snakeToolName("3d-print")).toBe("tool_3d_print");
    expect(snakeToolName("go")).toBe("tool_go");
  });

  it("suffixes names that are cut, that meet, that are taken, or of which nothing survives", () => {
    const names = safeToolNames(["get_weather", "GetWeather", "get-weather", "a".repeat(80), "查询天气", "book"], new Set(["book"]));
    expect(names.get("get_weather")).toBe("get_weather");
    expect(names.get("GetWeather")).toBe(`get_weather_${nameSuffix("GetWeather")}`);
    expect(names.get("get-weather")).toBe(`get_weather_${nameSuffix("get-weather")}`);
    expect(names.get("a".repeat(80))).toBe(`${"a".repeat(56)}_${nameSuffix("a".repeat(80))}`);
    expect(names.get("查询天气")).toBe(`tool_${nameSuffix("查询天气")}`);
    expect(names.get("book")).toBe(`book_${nameSuffix("book")}`);
    // Suffixes have no digits: the linter reads digit runs as versions or dates.
    expect(nameSuffix("GetWeather")).toMatch(/^[bcdfghjklmnpqrstvwxz]{7}$/);
  });

  it("any set of names: distinct safe names that every provider accepts, the same whatever the order", () => {
    fc.assert(
      fc.property(fc.uniqueArray(fc.string({ minLength: 1, maxLength: 90 }), { minLength: 1, maxLength: 12 }), (originals) => {
        const names = safeToolNames(originals);
        const values = [...names.values()];
        expect(new Set(values).size).toBe(originals.length);
        for (const name of values) {
          expect(isSafeToolName(name), name).toBe(true);
          for (const rule of Object.values(PROVIDER_NAME_RULES)) expect(rule.test(name)).toBe(true);
        }
        expect(safeToolNames([...originals].reverse())).toEqual(names);
      }),
    );
  });
});
