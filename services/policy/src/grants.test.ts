import { describe, expect, it } from "vitest";
import { Grants } from "./grants.js";

describe("Grants", () => {
  it("denies by default and allows by subject, by role and by wildcard tool", () => {
    const grants = Grants.parse(
      JSON.stringify({
        grants: [
          { tenant: "acme", subject: "carol", tools: ["fetch_document"] },
          { role: "admin", tools: ["*"] },
        ],
      }),
    );
    expect(grants.check({ tenant: "acme", subject: "dave", roles: [] }, "fetch_document").allowed).toBe(false);
    expect(grants.check({ tenant: "acme", subject: "carol", roles: [] }, "fetch_document").allowed).toBe(true);
    expect(grants.check({ tenant: "acme", subject: "carol", roles: [] }, "save_evidence").allowed).toBe(false);
    expect(grants.check({ tenant: "globex", subject: "carol", roles: [] }, "fetch_document").allowed).toBe(false);
    expect(grants.check({ tenant: "globex", subject: "erin", roles: ["admin"] }, "save_evidence").allowed).toBe(true);
  });

  it("versions grants by content and refuses a grant that names nobody", () => {
    const a = Grants.parse('{"grants":[{"role":"r","tools":["x"]}]}');
    const b = Grants.parse('{"grants":[{"role":"r","tools":["y"]}]}');
    expect(a.version).not.toBe(b.version);
    expect(() => Grants.parse('{"grants":[{"tools":["x"]}]}')).toThrow(/subject or a role/);
  });
});
