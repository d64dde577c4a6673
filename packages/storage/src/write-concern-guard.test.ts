import { describe, expect, it } from "vitest";
import { writeConcernProblem } from "./write-concern-guard.js";

// The rule itself, for the deployments the dev machine has no server of (a replica set, a sharded cluster);
// the integration test shows the refusal against the real server.
describe("writeConcernProblem", () => {
  it("asks a replica set or a sharded cluster for a journaled majority", () => {
    for (const topology of ["replica-set", "sharded"] as const) {
      expect(writeConcernProblem(topology, { w: "majority", journal: true })).toBeUndefined();
      const one = writeConcernProblem(topology, { w: 1, journal: true });
      expect(one?.code).toBe("MONGO_WRITE_CONCERN_UNSAFE");
      expect(one?.message).toMatch(
        /^write concern w: 1, j: true on a (replica set|sharded cluster) can lose acknowledged writes on failover: use w: "majority", j: true/,
      );
      expect(writeConcernProblem(topology, { w: "majority" })?.message).toContain('j: "default"');
      expect(writeConcernProblem(topology, undefined)?.message).toContain('w: "default"');
    }
  });

  it("asks a standalone server (FerretDB is one) for acknowledged, journaled writes", () => {
    expect(writeConcernProblem("standalone", { w: 1, journal: true })).toBeUndefined();
    expect(writeConcernProblem("standalone", { w: "majority", journal: true })).toBeUndefined();
    expect(writeConcernProblem("standalone", { w: 0, journal: true })?.message).toContain("does not wait for the write");
    const unjournaled = writeConcernProblem("standalone", { w: 1, journal: false });
    expect(unjournaled?.message).toBe(
      "write concern w: 1, j: false on a standalone server acknowledges writes before they are journaled: use j: true (for development only, TOOLGATE_UNSAFE_ALLOW=mongo-write-concern starts anyway)",
    );
    expect(unjournaled?.setting).toBe("MONGO_URL write concern");
  });
});
