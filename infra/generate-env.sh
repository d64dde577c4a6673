#!/usr/bin/env bash
# Writes .env for docker-compose: a fresh Ed25519 policy key pair, an API key for a researcher (orchestrator)
# and one for an approver (policy's approval API and page), and a NATS identity (nkey) for each service, for
# subscribers and for the operator, with the cluster's configuration that holds each to its subject
# permissions (infra/nats/auth/nats-auth.conf). Needs the workspace installed (`pnpm install`).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f .env ] && { echo ".env exists; delete it to generate new secrets" >&2; exit 1; }
[ -e infra/nats/auth ] && { echo "infra/nats/auth exists; delete it to generate new NATS identities" >&2; exit 1; }
pnpm exec tsc -b packages/cli
node packages/cli/dist/cli.js nats-auth --out infra/nats/auth --include ../cluster-node.conf
node --input-type=module -e '
import { generateKeyPairSync, randomBytes } from "node:crypto";
const { privateKey, publicKey } = generateKeyPairSync("ed25519");
const apiKey = "tgk_" + randomBytes(24).toString("hex");
const approverKey = "tgk_" + randomBytes(24).toString("hex");
const der = (k, type) => k.export({ type, format: "der" }).toString("base64");
console.log(`POLICY_SIGNING_KEY=${der(privateKey, "pkcs8")}`);
console.log(`POLICY_VERIFY_KEYS=${der(publicKey, "spki")}`);
console.log(`ORCHESTRATOR_API_KEYS=${JSON.stringify([{ key: apiKey, principal: { tenant: "default", subject: "researcher-1", roles: ["researcher"] } }])}`);
console.log(`POLICY_API_KEYS=${JSON.stringify([{ key: approverKey, principal: { tenant: "default", subject: "approver-1", roles: ["approver"] } }])}`);
console.error(`API key for researcher-1 (orchestrator, :8080): ${apiKey}`);
console.error(`API key for approver-1 (approvals, :8081/approvals): ${approverKey}`);
' > .env
cat infra/nats/auth/nats-seeds.env >> .env
chmod 600 .env
echo "wrote .env" >&2
