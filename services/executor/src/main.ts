import { decisionVerifier } from "@toolgate/contracts";
import { ToolRegistry } from "@toolgate/registry";
import { connectInfrastructure, runService } from "@toolgate/service-runtime";
import { MongoIdempotencyStore } from "@toolgate/storage";
import { toolsetDefinitions } from "@toolgate/toolsets";
import { loadConfig } from "./config.js";
import { executorHandler, type EvidenceRecord } from "./executor-worker.js";

const config = loadConfig(process.env);

await runService({
  name: "executor",
  config,
  async start({ logger }) {
    const verifier = decisionVerifier(config.POLICY_VERIFY_KEYS);
    const infra = await connectInfrastructure("executor", config, logger);
    const definitions = await toolsetDefinitions(config.TOOLGATE_TOOLSETS, {
      db: infra.mongo.db(config.TOOLS_MONGO_DB),
      executorId: config.INSTANCE_ID,
      ...(config.EXECUTOR_FAULTS ? { faults: config.EXECUTOR_FAULTS } : {}),
    });
    const registry = ToolRegistry.from(definitions.map((d) => d.contract));
    const byName = new Map(definitions.map((d) => [d.contract.name, d]));
    const shutdown = new AbortController();
    const worker = await infra.bus.consume(
      {
        // One durable consumer shared by every executor replica.
        name: "executor",
        filters: [infra.subjects.callEvents("authorized")],
        slots: config.EXECUTOR_SLOTS,
        maxAckPending: config.EXECUTOR_MAX_ACK_PENDING,
        ackWaitMs: config.EXECUTOR_ACK_WAIT_MS,
        maxDeliver: config.EXECUTOR_MAX_DELIVER,
      },
      executorHandler({
        bus: infra.bus,
        registry,
        definitions: byName,
        store: new MongoIdempotencyStore(infra.db),
        verifier,
        evidence: infra.db.collection<EvidenceRecord>("execution_evidence"),
        executorId: config.INSTANCE_ID,
        leaseMarginMs: config.EXECUTOR_LEASE_MARGIN_MS,
        logger,
        shutdown: shutdown.signal,
      }),
    );
    logger.info({ tools: registry.list().map((t) => t.ref), faults: config.EXECUTOR_FAULTS ?? null }, "executor configured");
    return {
      async stop() {
        // Finish what is running (tools keep their own timeouts), then release the connections.
        await worker.stop();
        shutdown.abort();
        await infra.close();
      },
    };
  },
});
