import type { ToolgateEvent } from "@toolgate/contracts";
import { connectContractCatalog, connectInfrastructure, runService } from "@toolgate/service-runtime";
import { MongoAuditStore } from "@toolgate/storage";
import { auditHandler } from "./audit-worker.js";
import { loadConfig } from "./config.js";
import { auditApi } from "./http-api.js";
import { auditMetrics } from "./metrics.js";
import { catalogTools } from "./redact.js";

const config = loadConfig(process.env);

await runService({
  name: "audit",
  config,
  async start({ logger, stats, metrics, tracing }) {
    const infra = await connectInfrastructure("audit", config, { logger, stats, tracing, metrics });
    const contracts = await connectContractCatalog(infra.bus, infra.subjects, {
      replicas: config.STREAM_REPLICAS,
      logger,
    });
    const store = new MongoAuditStore(infra.db, {
      writer: config.INSTANCE_ID,
      lingerMs: config.AUDIT_LINGER_MS,
      ...(infra.trust ? { trust: infra.trust } : {}),
    });
    const measured = auditMetrics(metrics);
    await store.ensureIndexes();
    const worker = await infra.bus.consume(
      {
        name: "audit",
        // No filter: every call and run event in the stream.
        filters: [],
        slots: config.AUDIT_SLOTS,
        maxAckPending: config.AUDIT_MAX_ACK_PENDING,
        ackWaitMs: config.AUDIT_ACK_WAIT_MS,
        maxDeliver: 100,
        // Audit acts on nothing: it keeps each event's signature and digest, and /verify checks them.
        verifySignatures: false,
        publishes: false,
        // One span per call and per run in their traces, for the event that closes the trail, not one per event.
        step: { step: "audit", name: () => "audit_record", when: closesTrail },
      },
      auditHandler({ store, tools: catalogTools(contracts), logger, refusals: measured.refusals }),
      (rejection, message) => store.recordRejected(rejection, message),
    );
    const api = auditApi(store, {
      metrics,
      measured,
      ...(config.AUDIT_API_TOKEN === undefined ? {} : { token: config.AUDIT_API_TOKEN }),
    });
    await api.listen({ host: config.HTTP_HOST, port: config.HTTP_PORT });
    const address = api.server.address();
    return {
      httpPort: typeof address === "object" && address ? address.port : config.HTTP_PORT,
      async stop() {
        await api.close();
        await worker.stop();
        contracts.close();
        await infra.close();
      },
    };
  },
});

/** Whether `event` is the last of its call's trail (the result attached) or its run's (the run ended). */
function closesTrail(event: ToolgateEvent): boolean {
  return event.kind === "call" ? event.type === "result_attached" : event.type === "completed" || event.type === "stopped";
}
