import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { connect } from "@nats-io/transport-node";
import { seedAuthenticator } from "@toolgate/bus";
import { PrivateNats, REPO_ROOT, Stack, testInfra } from "@toolgate/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { parse } from "yaml";

// NATS over TLS, as docker-compose runs it: a server that requires TLS with a certificate of a private CA
// (infra/nats/make-tls.sh, which ./infra/generate-env.sh runs), services that trust only that CA
// (NATS_TLS_CA) and connect with their own identities, and clients that cannot get in without both.
const run = promisify(execFile);

let nats: PrivateNats;
let stack: Stack;

beforeAll(async () => {
  nats = await PrivateNats.start({ identities: "only", tls: true });
  stack = await Stack.start({ natsUrl: nats.url, natsSeeds: nats.seeds, natsTlsCa: nats.tlsCa!, mongoUrl: testInfra().mongoUrl, toolsets: ["chaos"] });
});

afterAll(async () => {
  await stack?.stop();
  await nats?.stop();
});

it("runs a call end to end with every service on TLS, verified against the stack's CA", async () => {
  const answer = await stack.api<{ results: { status: string; result?: { ok: boolean } }[] }>("POST", "/v1/tool-calls", {
    calls: [{ id: "tls-1", name: "chaos_write", arguments: { n: 1, delay_ms: 0, effect: "after_delay" } }],
    wait_ms: 30_000,
  });
  expect(answer.status).toBe(200);
  expect(answer.body.results[0]).toMatchObject({ status: "done", result: { ok: true } });
  // Each service says so itself: its connection is encrypted (the server's connection list, through monitoring).
  const connz = (await (await fetch(`${nats.monitorUrl}/connz?subs=0`)).json()) as { connections: { name?: string; tls_version?: string }[] };
  const services = connz.connections.filter((c) => c.name?.startsWith("toolgate-"));
  expect(services.map((c) => c.name!.split("-")[1]).sort()).toEqual(expect.arrayContaining(["audit", "executor", "orchestrator", "policy"]));
  for (const c of services) expect(c.tls_version).toMatch(/^1\.[23]$/);
});

it("refuses a plain connection and one that does not trust the CA, even with a valid identity", async () => {
  const authenticator = seedAuthenticator(nats.seeds.subscriber!);
  // Plain TCP: the server requires TLS.
  await expect(connect({ servers: nats.url, authenticator, timeout: 3_000, tls: null })).rejects.toThrow();
  // TLS trusting only the system's CAs: the server's certificate is not one of theirs.
  await expect(connect({ servers: nats.url, authenticator, timeout: 3_000, tls: {} })).rejects.toThrow(/certificate/i);
  // With the CA, the same identity gets in.
  const trusted = await connect({ servers: nats.url, authenticator, timeout: 3_000, tls: { caFile: nats.tlsCa! } });
  expect(trusted.info?.tls_required).toBe(true);
  await trusted.close();
});

it("makes a CA and a certificate for the named hosts, a server configuration nats-server accepts, and keeps no CA key", async () => {
  const dir = mkdtempSync(join(tmpdir(), "tg-nats-tls-"));
  try {
    const out = join(dir, "tls");
    await run(join(REPO_ROOT, "infra/nats/make-tls.sh"), [out, "/etc/nats/tls", "nats-1", "nats-2", "nats-3", "127.0.0.1"]);
    const san = await run("openssl", ["x509", "-in", join(out, "server.pem"), "-noout", "-ext", "subjectAltName"]);
    expect(san.stdout).toMatch(/DNS:nats-1, DNS:nats-2, DNS:nats-3, IP Address:127\.0\.0\.1/);
    expect((await run("openssl", ["verify", "-CAfile", join(out, "ca.pem"), join(out, "server.pem")])).stdout).toMatch(/OK/);
    expect(readFileSync(join(out, "tls.conf"), "utf8")).toContain('cert_file: "/etc/nats/tls/server.pem"');
    const files = (await run("ls", [out])).stdout.trim().split("\n").sort();
    expect(files).toEqual(["ca.pem", "server-key.pem", "server.pem", "tls.conf"]);
    // Run again, it refuses to replace the CA the clients already trust.
    await expect(run(join(REPO_ROOT, "infra/nats/make-tls.sh"), [out, "/etc/nats/tls", "nats-1"])).rejects.toMatchObject({ code: 1 });
    // The compose servers' configuration (cluster-node-tls.conf, the tls/ directory next to it) is valid.
    const confDir = join(dir, "conf");
    await run("mkdir", [confDir]);
    for (const file of ["cluster-node-tls.conf", "cluster-node.conf", "jetstream.conf"]) await run("cp", [join(REPO_ROOT, "infra/nats", file), confDir]);
    await run(join(REPO_ROOT, "infra/nats/make-tls.sh"), [join(confDir, "tls"), join(confDir, "tls"), "localhost"]);
    const env = {
      TOOLGATE_NATS_NAME: "t",
      TOOLGATE_NATS_LISTEN: "127.0.0.1:1",
      TOOLGATE_NATS_HTTP: "127.0.0.1:2",
      TOOLGATE_NATS_STORE_DIR: dir,
      TOOLGATE_NATS_CLUSTER_LISTEN: "127.0.0.1:3",
      TOOLGATE_NATS_ROUTE_1: "nats-route://127.0.0.1:3",
      TOOLGATE_NATS_ROUTE_2: "nats-route://127.0.0.1:4",
      TOOLGATE_NATS_ROUTE_3: "nats-route://127.0.0.1:5",
    };
    const checked = await run(`${REPO_ROOT}infra/.bin/nats-server`, ["-t", "-c", join(confDir, "cluster-node-tls.conf")], { env });
    expect(checked.stdout + checked.stderr).toMatch(/configuration file .* is valid/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

it("wires docker-compose for TLS: every service trusts the CA it mounts, every node serves the TLS configuration", async () => {
  const compose = parse(readFileSync(join(REPO_ROOT, "docker-compose.yml"), "utf8"), { merge: true }) as {
    services: Record<string, { environment?: Record<string, string>; volumes?: string[]; command?: string[] }>;
  };
  for (const name of ["orchestrator", "policy", "executor", "audit"]) {
    const service = compose.services[name]!;
    const ca = service.environment?.NATS_TLS_CA;
    expect(ca, name).toBe("/etc/toolgate/nats-ca.pem");
    expect(service.volumes, name).toContain(`./infra/nats/tls/ca.pem:${ca}:ro`);
  }
  // The nodes run the nats-auth.conf ./infra/generate-env.sh writes, which includes the TLS configuration.
  const script = readFileSync(join(REPO_ROOT, "infra/generate-env.sh"), "utf8");
  expect(script).toMatch(/nats-auth --out infra\/nats\/auth --include \.\.\/cluster-node-tls\.conf/);
  expect(script).toMatch(/make-tls\.sh infra\/nats\/tls \/etc\/nats\/tls nats-1 nats-2 nats-3/);
  for (const node of ["nats-1", "nats-2", "nats-3"]) expect(compose.services[node]!.command).toEqual(["-c", "/etc/nats/auth/nats-auth.conf"]);
});
