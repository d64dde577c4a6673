import { generateKeyPairSync } from "node:crypto";
import { keyIdOf, subjectCatalogue } from "@toolgate/contracts";
import { createLogger, RuntimeStats } from "@toolgate/telemetry";
import { testInfra, uniqueName } from "@toolgate/testkit";
import { describe, expect, it } from "vitest";
import { BaseEnvSchema, ConfigError, parseEnv } from "./config.js";
import { connectInfrastructure } from "./infrastructure.js";
import { isUnsafeSettingRefusal } from "./start-up-guards.js";

// The guards as a service meets them: configured from the environment, refusing, or warning once under the
// override. Each guard's own refusals are tested beside it (bus, storage).

function recordingLogger() {
  const lines: { level: string; msg: string; guard?: string; setting?: string }[] = [];
  const logger = createLogger({ service: "test", level: "info", destination: { write: (line) => lines.push(JSON.parse(line) as (typeof lines)[number]) } });
  return { logger, lines };
}

const eventKey = generateKeyPairSync("ed25519");
const der = (type: "pkcs8" | "spki") => (type === "pkcs8" ? eventKey.privateKey : eventKey.publicKey).export({ type, format: "der" }).toString("base64");

function env(overrides: Record<string, string> = {}) {
  return parseEnv(BaseEnvSchema, {
    NATS_URL: testInfra().natsUrl,
    MONGO_URL: testInfra().mongoUrl,
    TOOLGATE_SUBJECT_PREFIX: uniqueName("s").toLowerCase(),
    EVENT_TRUSTED_KEYS: `policy:${der("spki")}`,
    ...overrides,
  });
}

function unjournaledMongoUrl(): string {
  const url = new URL(testInfra().mongoUrl);
  url.searchParams.set("journal", "false");
  return url.toString();
}

describe("start-up guards in a service", () => {
  it("refuses a service without event keys, names the variable, and warns once when it is allowed", async () => {
    const { logger, lines } = recordingLogger();
    const untrusting = await connectInfrastructure("policy", env({ EVENT_TRUSTED_KEYS: "" }), { logger, stats: new RuntimeStats() }).catch((e: unknown) => e);
    expect(untrusting).toMatchObject({ guard: "unsigned-events", setting: "EVENT_TRUSTED_KEYS" });
    const unsigned = await connectInfrastructure("policy", env(), { logger, stats: new RuntimeStats() }).catch((e: unknown) => e);
    expect(unsigned).toMatchObject({ guard: "unsigned-events", setting: "EVENT_SIGNING_KEY" });
    // A signing key the trust list holds for another role would get every one of its events refused.
    const otherRole = await connectInfrastructure("executor", env({ EVENT_SIGNING_KEY: der("pkcs8") }), { logger, stats: new RuntimeStats() }).catch(
      (e: unknown) => e,
    );
    expect(otherRole).toBeInstanceOf(ConfigError);
    expect(String(otherRole)).not.toContain(der("pkcs8"));
    expect(lines.filter((l) => l.level !== "info")).toHaveLength(0);

    const signed = await connectInfrastructure("policy", env({ EVENT_SIGNING_KEY: der("pkcs8") }), { logger, stats: new RuntimeStats() });
    expect(signed.trust?.roleOf(keyIdOf(eventKey.publicKey))).toBe("policy");
    await signed.close();
    const allowed = await connectInfrastructure("policy", env({ EVENT_TRUSTED_KEYS: "", TOOLGATE_UNSAFE_ALLOW: "unsigned-events" }), {
      logger,
      stats: new RuntimeStats(),
    });
    await allowed.close();
    expect(lines.filter((l) => l.level === "warn").map((l) => l.setting)).toEqual(["EVENT_TRUSTED_KEYS", "EVENT_SIGNING_KEY"]);
  });

  it("reads TOOLGATE_UNSAFE_ALLOW and NATS_MONITOR_URL as lists, refusing unknown guard names", () => {
    const config = env({ TOOLGATE_UNSAFE_ALLOW: "nats-version, mongo-write-concern", NATS_MONITOR_URL: "http://n1:8222,http://n2:8222" });
    expect(config.TOOLGATE_UNSAFE_ALLOW).toEqual(["nats-version", "mongo-write-concern"]);
    expect(config.NATS_MONITOR_URL).toEqual(["http://n1:8222", "http://n2:8222"]);
    expect(env().TOOLGATE_UNSAFE_ALLOW).toEqual([]);
    expect(() => env({ TOOLGATE_UNSAFE_ALLOW: "everything" })).toThrow(ConfigError);
    expect(() => env({ NATS_MONITOR_URL: "nats://n1:4222" })).toThrow(/NATS_MONITOR_URL/);
  });

  it("refuses a weak MongoDB write concern, closing NATS again, and warns once when it is allowed", async () => {
    const { logger, lines } = recordingLogger();
    const config = env({ MONGO_URL: unjournaledMongoUrl() });
    const error = await connectInfrastructure("test", config, { logger, stats: new RuntimeStats() }).catch((e: unknown) => e);
    expect(isUnsafeSettingRefusal(error)).toBe(true);
    expect(error).toMatchObject({ guard: "mongo-write-concern", setting: "MONGO_URL write concern" });
    expect(lines.filter((l) => l.level !== "info")).toHaveLength(0);

    const allowed = env({ MONGO_URL: unjournaledMongoUrl(), TOOLGATE_UNSAFE_ALLOW: "mongo-write-concern" });
    const infra = await connectInfrastructure("test", allowed, { logger, stats: new RuntimeStats() });
    await infra.close();
    const warnings = lines.filter((l) => l.level === "warn");
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ guard: "mongo-write-concern", setting: "MONGO_URL write concern" });
    expect(warnings[0]!.msg).toMatch(/^unsafe setting allowed by TOOLGATE_UNSAFE_ALLOW \(development only\): write concern w: "majority", j: false /);
  });

  it("lets only the listed guard pass: a memory-storage stream is still refused when Mongo's is allowed", async () => {
    const { logger, lines } = recordingLogger();
    const config = env({ TOOLGATE_UNSAFE_ALLOW: "mongo-write-concern" });
    const subjects = subjectCatalogue(config.TOOLGATE_SUBJECT_PREFIX);
    const probe = await connectInfrastructure("probe", config, { logger, stats: new RuntimeStats() });
    // The JetStream API by hand (this package has no JetStream client of its own): replace the stream the probe
    // created with one on memory storage.
    const api = async (verb: string, body: unknown = {}) => probe.bus.connection.request(`$JS.API.STREAM.${verb}.${subjects.stream}`, JSON.stringify(body));
    await api("DELETE");
    const created = (await api("CREATE", { name: subjects.stream, subjects: [subjects.allCalls, subjects.allRuns], storage: "memory" })).json<{
      error?: unknown;
    }>();
    expect(created.error).toBeUndefined();
    try {
      const error = await connectInfrastructure("test", config, { logger, stats: new RuntimeStats() }).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: "STREAM_SETTINGS_MISMATCH", guard: "stream-settings", setting: "stream storage" });
      const allowed = await connectInfrastructure("test", { ...config, TOOLGATE_UNSAFE_ALLOW: ["stream-settings"] }, { logger, stats: new RuntimeStats() });
      await allowed.close();
      expect(lines.filter((l) => l.level === "warn").map((l) => l.guard)).toEqual(["stream-settings"]);
    } finally {
      await api("DELETE");
      await probe.close();
    }
  });
});
