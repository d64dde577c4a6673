import { execFile } from "node:child_process";
import { generateKeyPairSync } from "node:crypto";
import { promisify } from "node:util";
import { REPO_ROOT, ServiceProcess, testInfra, uniqueName } from "@toolgate/testkit";
import { describe, expect, it } from "vitest";

const run = promisify(execFile);

// A service that meets an unsafe setting logs one line saying which and why, and exits 1; with the setting's
// guard in TOOLGATE_UNSAFE_ALLOW it warns and starts. The audit service stands for all four (they share
// connectInfrastructure and runService).

const TRUSTED = `policy:${generateKeyPairSync("ed25519").publicKey.export({ type: "spki", format: "der" }).toString("base64")}`;

function env(overrides: Record<string, string> = {}): Record<string, string> {
  const prefix = uniqueName("guard").toLowerCase();
  return {
    EVENT_TRUSTED_KEYS: TRUSTED,
    NATS_URL: testInfra().natsUrl,
    MONGO_URL: testInfra().mongoUrl,
    MONGO_DB: `${prefix}_audit`,
    TOOLGATE_SUBJECT_PREFIX: prefix,
    HTTP_PORT: "0",
    ...overrides,
  };
}

function unjournaledMongoUrl(): string {
  const url = new URL(testInfra().mongoUrl);
  url.searchParams.set("journal", "false");
  return url.toString();
}

describe("a service meeting an unsafe setting", () => {
  it("exits 1 on a NATS server too old for its consumers, whatever the override says", async () => {
    // The machine's own nats-server 2.9, which dev.sh leaves running on 4222.
    const started = ServiceProcess.start("audit", env({ NATS_URL: "nats://127.0.0.1:4222", TOOLGATE_UNSAFE_ALLOW: "nats-version" }));
    await expect(started).rejects.toThrow(/^audit exited \(1\) before ready:/);
    const message = await started.catch((error: Error) => error.message);
    expect(message).toMatch(
      /"level":"fatal",.*"code":"NATS_VERSION_UNSAFE","guard":"nats-version","setting":"nats-server version".*"msg":"refusing to start: nats-server 2\.9\.\d+ \([^)]*\) is older than 2\.10\.0: Toolgate's consumers need several filter subjects per consumer/,
    );
  });

  it("exits 1 on a write concern weaker than the database supports, and starts with a warning when allowed", async () => {
    const refused = ServiceProcess.start("audit", env({ MONGO_URL: unjournaledMongoUrl() }));
    const message = await refused.then(
      () => "started",
      (error: Error) => error.message,
    );
    expect(message).toMatch(/^audit exited \(1\) before ready:/);
    expect(message).toMatch(
      /"guard":"mongo-write-concern","setting":"MONGO_URL write concern".*"msg":"refusing to start: write concern w: \\"majority\\", j: false /,
    );

    const audit = await ServiceProcess.start("audit", env({ MONGO_URL: unjournaledMongoUrl(), TOOLGATE_UNSAFE_ALLOW: "mongo-write-concern" }));
    try {
      const warnings = audit.logs().filter((l) => l.guard === "mongo-write-concern");
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatchObject({ level: "warn", setting: "MONGO_URL write concern" });
      expect(String(warnings[0]!.msg)).toMatch(/^unsafe setting allowed by TOOLGATE_UNSAFE_ALLOW \(development only\): /);
    } finally {
      await audit.stop();
    }
  });

  it("exits 1 without the keys events are checked with, naming the variable", async () => {
    const message = await ServiceProcess.start("audit", env({ EVENT_TRUSTED_KEYS: "" })).then(
      () => "started",
      (error: Error) => error.message,
    );
    expect(message).toMatch(/^audit exited \(1\) before ready:/);
    expect(message).toMatch(/"guard":"unsigned-events","setting":"EVENT_TRUSTED_KEYS".*"msg":"refusing to start: EVENT_TRUSTED_KEYS is not set/);
  });
});

describe("the contracts CLI", () => {
  it("creates the catalog stream with the replicas it is given, as the services' stream guard expects them", async () => {
    const prefix = uniqueName("guard").toLowerCase();
    const args = (replicas: string) => [
      `${REPO_ROOT}packages/registry/dist/contracts-cli.js`,
      "publish",
      "--module",
      `${REPO_ROOT}packages/toolsets/dist/index.js`,
      "--nats",
      testInfra().natsUrl,
      "--stream",
      `${prefix.toUpperCase()}_CONTRACTS`,
      "--prefix",
      `${prefix}.contracts`,
      "--replicas",
      replicas,
    ];
    // A single server cannot hold three replicas: the request reached it (before, every catalog stream was R1).
    const refused = await run(process.execPath, args("3")).then(
      () => "published",
      (error: { stderr: string }) => error.stderr,
    );
    expect(refused).toMatch(/cannot create stream .*_CONTRACTS: replicas > 1 not supported in non-clustered mode/);
    const invalid = await run(process.execPath, args("0")).catch((error: { code: number; stderr: string }) => error);
    expect(invalid).toMatchObject({ code: 2, stderr: expect.stringContaining("--replicas must be an integer from 1 to 5") });
  });
});
