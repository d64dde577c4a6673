import { generateKeyPairSync } from "node:crypto";
import { createLogger } from "@toolgate/telemetry";
import { PrivateFerretDb, testInfra, uniqueName, waitFor } from "@toolgate/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { BaseEnvSchema } from "./config.js";
import { connectInfrastructure, type Infrastructure } from "./infrastructure.js";
import { RuntimeStats } from "@toolgate/telemetry";

// A service says once that its database went away, and once that it is back: against a FerretDB of its own.
let ferret: PrivateFerretDb;
let infra: Infrastructure;
const lines: { level: string; msg: string }[] = [];

beforeAll(async () => {
  ferret = await PrivateFerretDb.start();
  const logger = createLogger({
    service: "test",
    level: "info",
    destination: { write: (line) => lines.push(JSON.parse(line) as { level: string; msg: string }) },
  });
  const trusted = `policy:${generateKeyPairSync("ed25519").publicKey.export({ type: "spki", format: "der" }).toString("base64")}`;
  const config = BaseEnvSchema.parse({
    NATS_URL: testInfra().natsUrl,
    MONGO_URL: ferret.url,
    TOOLGATE_SUBJECT_PREFIX: uniqueName("r").toLowerCase(),
    EVENT_TRUSTED_KEYS: trusted,
  });
  infra = await connectInfrastructure("test", config, { logger, stats: new RuntimeStats() });
}, 60_000);
afterAll(async () => {
  await infra?.close().catch(() => undefined);
  await ferret?.stop();
});

it("logs the loss and the return of the database once each", async () => {
  await infra.db.command({ ping: 1 });
  await ferret.kill();
  await waitFor(() => lines.some((l) => l.msg.startsWith("database unreachable")), { description: "the loss to be logged", timeoutMs: 30_000 });
  await ferret.start();
  await waitFor(() => lines.some((l) => l.msg === "database reachable again"), { description: "the return to be logged", timeoutMs: 30_000 });
  expect(lines.filter((l) => l.msg.startsWith("database unreachable"))).toHaveLength(1);
  // Both at warn: an operator who reads warnings sees the outage end as well as begin.
  expect(lines.filter((l) => l.msg === "database reachable again").map((l) => l.level)).toEqual(["warn"]);
  expect(lines.filter((l) => l.msg.startsWith("database unreachable")).map((l) => l.level)).toEqual(["warn"]);
  await infra.db.command({ ping: 1 });
}, 90_000);
