#!/usr/bin/env bash
# Writes .env for docker-compose: a fresh Ed25519 policy key pair, an event signing key for each service that
# publishes (with the list of their public keys every service trusts, EVENT_TRUSTED_KEYS), an API key for a researcher (orchestrator)
# and one for an approver (policy's approval API and page), and a NATS identity (nkey) for each service, for
# subscribers and for the operator, with the cluster's configuration that holds each to its subject
# permissions (infra/nats/auth/nats-auth.conf), and a private CA with the NATS servers' certificate, so that
# every client connection is TLS verified against that CA (infra/nats/tls/). Needs the workspace installed
# (`pnpm install`) and openssl.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f .env ] && { echo ".env exists; delete it to generate new secrets" >&2; exit 1; }
[ -e infra/nats/auth ] && { echo "infra/nats/auth exists; delete it to generate new NATS identities" >&2; exit 1; }
[ -e infra/nats/tls ] && { echo "infra/nats/tls exists; delete it to generate a new NATS CA and certificate" >&2; exit 1; }
command -v openssl >/dev/null || { echo "openssl is needed for the NATS servers' certificate" >&2; exit 1; }
pnpm exec tsc -b packages/cli
node packages/cli/dist/cli.js nats-auth --out infra/nats/auth --include ../cluster-node-tls.conf
# The compose nodes read it at /etc/nats/tls; the services trust ca.pem (NATS_TLS_CA).
infra/nats/make-tls.sh infra/nats/tls /etc/nats/tls nats-1 nats-2 nats-3 localhost 127.0.0.1
node --input-type=module -e '
import { generateKeyPairSync, randomBytes } from "node:crypto";
const { privateKey, publicKey } = generateKeyPairSync("ed25519");
const apiKey = "tgk_" + randomBytes(24).toString("hex");
const approverKey = "tgk_" + randomBytes(24).toString("hex");
const der = (k, type) => k.export({ type, format: "der" }).toString("base64");
console.log(`POLICY_SIGNING_KEY=${der(privateKey, "pkcs8")}`);
console.log(`POLICY_VERIFY_KEYS=${der(publicKey, "spki")}`);
const trusted = [];
for (const service of ["orchestrator", "policy", "executor"]) {
  const pair = generateKeyPairSync("ed25519");
  console.log(`EVENT_SIGNING_KEY_${service.toUpperCase()}=${der(pair.privateKey, "pkcs8")}`);
  trusted.push(`${service}:${der(pair.publicKey, "spki")}`);
}
console.log(`EVENT_TRUSTED_KEYS=${trusted.join(",")}`);
console.log(`ORCHESTRATOR_API_KEYS=${JSON.stringify([{ key: apiKey, principal: { tenant: "default", subject: "researcher-1", roles: ["researcher"] } }])}`);
console.log(`POLICY_API_KEYS=${JSON.stringify([{ key: approverKey, principal: { tenant: "default", subject: "approver-1", roles: ["approver"] } }])}`);
console.error(`API key for researcher-1 (orchestrator, :8080): ${apiKey}`);
console.error(`API key for approver-1 (approvals, :8081/approvals): ${approverKey}`);
' > .env
cat infra/nats/auth/nats-seeds.env >> .env
chmod 600 .env
echo "wrote .env" >&2
