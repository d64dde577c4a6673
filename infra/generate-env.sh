#!/usr/bin/env bash
# Writes .env for docker-compose: a fresh Ed25519 policy key pair and one API key for a researcher.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f .env ] && { echo ".env exists; delete it to generate new secrets" >&2; exit 1; }
node --input-type=module -e '
import { generateKeyPairSync, randomBytes } from "node:crypto";
const { privateKey, publicKey } = generateKeyPairSync("ed25519");
const apiKey = "tgk_" + randomBytes(24).toString("hex");
const der = (k, type) => k.export({ type, format: "der" }).toString("base64");
console.log(`POLICY_SIGNING_KEY=${der(privateKey, "pkcs8")}`);
console.log(`POLICY_VERIFY_KEYS=${der(publicKey, "spki")}`);
console.log(`ORCHESTRATOR_API_KEYS=${JSON.stringify([{ key: apiKey, principal: { tenant: "default", subject: "researcher-1", roles: ["researcher"] } }])}`);
console.error(`API key for researcher-1: ${apiKey}`);
' > .env
chmod 600 .env
echo "wrote .env" >&2
