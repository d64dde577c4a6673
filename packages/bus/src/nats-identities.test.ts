import { CALL_EVENT_TYPES, CALL_EVENT_OWNERS, REFUSAL_REPORTERS, RUN_EVENT_TYPES } from "@toolgate/contracts";
import { describe, expect, it } from "vitest";
import { NATS_ROLES, generateNatsIdentities, natsAuthorizationConfig, natsPermissions, parseNatsSeeds } from "./nats-identities.js";

const publishable = (role: (typeof NATS_ROLES)[number]) => natsPermissions(role, "toolgate").publish.allow.filter((s) => s.startsWith("toolgate."));

describe("natsPermissions", () => {
  it("lets exactly one service publish each call event type, its owner; refusal reports come from every service that acts", () => {
    for (const type of CALL_EVENT_TYPES) {
      const publishers = NATS_ROLES.filter((role) => publishable(role).includes(`toolgate.call.*.${type}`));
      expect(publishers, type).toEqual(type === "event_refused" ? [...REFUSAL_REPORTERS] : [CALL_EVENT_OWNERS[type]]);
    }
    for (const type of RUN_EVENT_TYPES) {
      const publishers = NATS_ROLES.filter((role) => publishable(role).includes(`toolgate.run.*.${type}`));
      expect(publishers, type).toEqual(type === "event_refused" ? [...REFUSAL_REPORTERS] : ["orchestrator"]);
    }
  });

  it("gives subscribers and audit no event subject to publish, and no wildcard over events to anyone", () => {
    expect(publishable("subscriber")).toEqual([]);
    expect(publishable("audit")).toEqual([]);
    for (const role of NATS_ROLES) expect(natsPermissions(role).publish.allow).not.toContain(">");
    for (const role of NATS_ROLES) expect(publishable(role).filter((s) => s.startsWith("toolgate.call.*.") && s.split(".").length !== 4)).toEqual([]);
  });

  it("keeps stream deletion and purges from services", () => {
    for (const role of ["orchestrator", "policy", "executor", "audit"] as const)
      expect(natsPermissions(role).publish.deny).toEqual(
        expect.arrayContaining(["$JS.API.STREAM.DELETE.>", "$JS.API.STREAM.PURGE.>", "$JS.API.STREAM.MSG.DELETE.>"]),
      );
  });
});

describe("identities and their configuration", () => {
  it("lists every identity's public key, never a seed, and round-trips the seeds file", () => {
    const identities = generateNatsIdentities();
    const config = natsAuthorizationConfig(identities, { prefix: "*" });
    for (const { publicKey, seed } of identities) {
      expect(config).toContain(publicKey);
      expect(config).not.toContain(seed);
    }
    expect(config).not.toContain("no_auth_user");
    expect(natsAuthorizationConfig(identities, { openToLocalTools: true })).toContain('no_auth_user: "local-tools"');
    const file = identities.map(({ role, seed }) => `TOOLGATE_NATS_SEED_${role.toUpperCase()}=${seed}\n`).join("");
    expect(parseNatsSeeds(file)).toEqual(Object.fromEntries(identities.map(({ role, seed }) => [role, seed])));
  });
});
