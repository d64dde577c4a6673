import { TERMINAL_CALL_EVENT_TYPES } from "@toolgate/contracts";
import { connectInfrastructure, runService } from "@toolgate/service-runtime";
import { CallWaiters } from "./call-waiters.js";
import { loadConfig } from "./config.js";
import { orchestratorApi } from "./http-api.js";
import type { ModelAdapter } from "./model.js";
import { RunLoop } from "./run-loop.js";
import { RunStore } from "./run-store.js";
import { scriptedModel } from "./scripted-model.js";

const config = loadConfig(process.env);

/** Model adapters by name: `scripted:<scenario>` for the deterministic test and demo model. */
function models(name: string): ModelAdapter | undefined {
  return name.startsWith("scripted:") ? scriptedModel(name.slice("scripted:".length)) : undefined;
}

await runService({
  name: "orchestrator",
  config,
  async start({ logger }) {
    const infra = await connectInfrastructure("orchestrator", config, logger);
    const store = new RunStore(infra.db);
    await store.ensureIndexes();
    const waiters = new CallWaiters({ store, bus: infra.bus, subjects: infra.subjects });
    const loop = new RunLoop({ store, bus: infra.bus, models, waiters, maxTurns: config.ORCHESTRATOR_MAX_TURNS, instanceId: config.INSTANCE_ID, logger });
    const worker = await infra.bus.consume(
      {
        name: "orchestrator",
        // One durable per terminal event type: servers before 2.10 allow one filter per consumer.
        filters: TERMINAL_CALL_EVENT_TYPES.map((t) => infra.subjects.callEvents(t)),
        slots: config.ORCHESTRATOR_SLOTS,
        maxAckPending: config.ORCHESTRATOR_MAX_ACK_PENDING,
        ackWaitMs: 60_000,
        maxDeliver: 20,
      },
      loop.onTerminal,
    );
    const resumed = await loop.resume();
    const api = orchestratorApi({ loop, store, waiters, apiKeys: config.ORCHESTRATOR_API_KEYS });
    await api.listen({ host: config.HTTP_HOST, port: config.HTTP_PORT });
    const address = api.server.address();
    logger.info({ resumed_runs: resumed }, "orchestrator configured");
    return {
      httpPort: typeof address === "object" && address ? address.port : config.HTTP_PORT,
      async stop() {
        await api.close();
        waiters.close();
        await worker.stop();
        await infra.close();
      },
    };
  },
});
