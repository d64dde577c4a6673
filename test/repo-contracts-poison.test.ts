import { lintContracts } from "@toolgate/registry";
import { LINTED_TOOLSETS, toolsetContracts } from "@toolgate/toolsets";
import { describe, expect, it } from "vitest";

// The poisoning rules must not cry wolf on Toolgate's own tool sets (what `pnpm lint:contracts` checks too).
describe("the repo's own contracts", () => {
  it("carry no poisoning finding and no error at all", async () => {
    const contracts = await toolsetContracts(LINTED_TOOLSETS);
    expect(contracts.length).toBeGreaterThan(10);
    const reports = lintContracts(contracts);
    const poison = reports.flatMap((r) => r.findings.filter((f) => f.rule.startsWith("poison-") || f.rule === "open-object-consequential"));
    expect(poison).toEqual([]);
    expect(reports.filter((r) => !r.ok).map((r) => r.name)).toEqual([]);
  });
});
