import { readFileSync, watchFile } from "node:fs";
import { decisionSigner } from "@toolgate/contracts";
import { ToolRegistry } from "@toolgate/registry";
import { connectInfrastructure, runService } from "@toolgate/service-runtime";
import { toolsetContracts } from "@toolgate/toolsets";
import { loadConfig } from "./config.js";
import { Grants } from "./grants.js";
import { policyHandler } from "./policy-worker.js";

const config = loadConfig(process.env);

await runService({
  name: "policy",
  config,
  async start({ logger }) {
    const registry = ToolRegistry.from(toolsetContracts(config.TOOLGATE_TOOLSETS));
    const signer = decisionSigner(config.POLICY_SIGNING_KEY);
    const readGrants = (): Grants => Grants.parse(config.POLICY_GRANTS_FILE ? readFileSync(config.POLICY_GRANTS_FILE, "utf8") : config.POLICY_GRANTS!);
    let grants = readGrants();
    if (config.POLICY_GRANTS_FILE) {
      // A bad edit keeps the previous grants in force rather than denying or allowing everything.
      watchFile(config.POLICY_GRANTS_FILE, { interval: 1_000 }, () => {
        try {
          grants = readGrants();
          logger.info({ policy_version: grants.version }, "grants reloaded");
        } catch (error) {
          logger.error({ err: error }, "grants reload failed; keeping the previous grants");
        }
      });
    }
    const infra = await connectInfrastructure("policy", config, logger);
    const worker = await infra.bus.consume(
      {
        name: "policy",
        filters: [infra.subjects.callEvents("proposed")],
        slots: config.POLICY_SLOTS,
        maxAckPending: config.POLICY_MAX_ACK_PENDING,
        ackWaitMs: 30_000,
        maxDeliver: 20,
      },
      policyHandler({ bus: infra.bus, registry, grants: () => grants, signer, decisionTtlMs: config.POLICY_DECISION_TTL_MS, logger }),
    );
    logger.info({ tools: registry.list().map((t) => t.ref), policy_version: grants.version, key_id: signer.keyId }, "policy configured");
    return {
      async stop() {
        await worker.stop();
        await infra.close();
      },
    };
  },
});
