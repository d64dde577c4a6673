#!/usr/bin/env bash
# Writes .env for docker-compose: a fresh Ed25519 signing key per role (orchestrator, policy, executor) with the
# trusted public keys, an API key for a researcher (orchestrator) and one for an approver (policy's approval API
# and page). Rotate one role's key later with `toolgate keys --role <role>`.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f .env ] && { echo ".env exists; delete it to generate new secrets" >&2; exit 1; }
node --input-type=module -e '
import { generateKeyPairSync, randomBytes } from "node:crypto";
const roles = ["orchestrator", "policy", "executor"];
const pairs = Object.fromEntries(roles.map((role) => [role, generateKeyPairSync("ed25519")]));
const apiKey = "tgk_" + randomBytes(24).toString("hex");
const approverKey = "tgk_" + randomBytes(24).toString("hex");
const der = (k, type) => k.export({ type, format: "der" }).toString("base64");
for (const role of roles) console.log(`${role.toUpperCase()}_SIGNING_KEY=${der(pairs[role].privateKey, "pkcs8")}`);
console.log(`TOOLGATE_TRUSTED_KEYS=${JSON.stringify(Object.fromEntries(roles.map((role) => [role, [der(pairs[role].publicKey, "spki")]])))}`);
console.log(`ORCHESTRATOR_API_KEYS=${JSON.stringify([{ key: apiKey, principal: { tenant: "default", subject: "researcher-1", roles: ["researcher"] } }])}`);
console.log(`POLICY_API_KEYS=${JSON.stringify([{ key: approverKey, principal: { tenant: "default", subject: "approver-1", roles: ["approver"] } }])}`);
console.error(`API key for researcher-1 (orchestrator, :8080): ${apiKey}`);
console.error(`API key for approver-1 (approvals, :8081/approvals): ${approverKey}`);
' > .env
chmod 600 .env
echo "wrote .env" >&2
