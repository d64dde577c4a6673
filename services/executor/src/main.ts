import { MongoApprovalStore } from "@toolgate/approvals";
import { decisionVerifier } from "@toolgate/contracts";
import { ToolRegistry, type ToolContext } from "@toolgate/registry";
import { connectContractCatalog, connectInfrastructure, runService } from "@toolgate/service-runtime";
import { serveMetrics } from "@toolgate/telemetry";
import { MongoIdempotencyStore } from "@toolgate/storage";
import { toolsetContracts, toolsetDefinitions, type OperationControl } from "@toolgate/toolsets";
import { loadConfig } from "./config.js";
import { executorHandler, type DeadLetterRecord, type EvidenceRecord } from "./executor-worker.js";
import { MongoOperationStore } from "./operation-store.js";
import { LeaseKeeper } from "./lease-keeper.js";
import { executorMetrics } from "./metrics.js";
import { OperationTracker } from "./operations.js";
import { ToolInvoker } from "./tool-invoker.js";
import { HttpTransport } from "./transports/http-transport.js";
import { McpTransport, type Quarantine } from "./transports/mcp-transport.js";

const config = loadConfig(process.env);

await runService({
  name: "executor",
  config,
  async start({ logger, stats, metrics, tracing }) {
    const measured = executorMetrics(metrics);
    const verifier = decisionVerifier(config.POLICY_VERIFY_KEYS);
    const registry = ToolRegistry.from(await toolsetContracts(config.TOOLGATE_TOOLSETS));
    const contracts = registry.list().map((t) => t.contract);
    const infra = await connectInfrastructure("executor", config, { logger, stats, tracing, metrics });
    const catalog = await connectContractCatalog(infra.bus, infra.subjects, { replicas: config.STREAM_REPLICAS, seed: contracts, logger });
    const shutdown = new AbortController();
    const evidence = infra.db.collection<EvidenceRecord>("execution_evidence");
    const recordEvidence = async (ref: string, callId: string, tool: string, attempt: number, e: { kind: string; detail: unknown }): Promise<void> => {
      await evidence
        .insertOne({ _id: ref, call_id: callId, tool, attempt, executor: config.INSTANCE_ID, kind: e.kind, detail: e.detail, at: new Date() })
        .catch((error: unknown) => {
          if ((error as { code?: unknown }).code !== 11000) logger.warn({ err: error, evidence_ref: ref }, "could not store evidence");
        });
    };

    // The standard operation tools are answered by the tracker, which itself runs tools: wired in two steps.
    const operations: { tracker?: OperationTracker } = {};
    const control: OperationControl = {
      status: (id: string, ctx: ToolContext) => operations.tracker!.status(id, ctx),
      cancel: (id: string, ctx: ToolContext) => operations.tracker!.cancel(id, ctx),
    };
    const definitions = await toolsetDefinitions(config.TOOLGATE_TOOLSETS, {
      db: infra.mongo.db(config.TOOLS_MONGO_DB),
      executorId: config.INSTANCE_ID,
      operations: control,
      executions: (tool, repeated) => {
        stats.add(`tool.${tool}.executions`);
        if (repeated) stats.add(`tool.${tool}.repeated_executions`);
      },
      ...(config.EXECUTOR_FAULTS ? { faults: config.EXECUTOR_FAULTS } : {}),
    });
    // Also when only the catalog brings HTTP tools later: the allow-list is what permits them.
    const http =
      contracts.some((c) => c.transport.kind === "http") || Object.keys(config.EXECUTOR_HTTP_ENDPOINTS).length > 0
        ? new HttpTransport({ endpoints: config.EXECUTOR_HTTP_ENDPOINTS, connections: config.EXECUTOR_HTTP_CONNECTIONS })
        : undefined;
    const quarantines = infra.db.collection<{ _id: string; server: string } & Quarantine>("mcp_quarantines");
    const mcp =
      contracts.some((c) => c.transport.kind === "mcp") || Object.keys(config.EXECUTOR_MCP_SERVERS).length > 0
        ? new McpTransport({
            servers: config.EXECUTOR_MCP_SERVERS,
            contracts,
            recheckMs: config.EXECUTOR_MCP_RECHECK_MS,
            logger,
            onQuarantine: (server, q) =>
              void quarantines
                .insertOne({ _id: `${server}:${config.INSTANCE_ID}:${q.at.getTime()}`, server, ...q })
                .catch((error: unknown) => logger.warn({ err: error, server }, "could not record the quarantine")),
          })
        : undefined;
    if (mcp) {
      // MCP pins follow the catalog: the current version of each MCP contract is the approved definition.
      const approveCurrent = (): void => {
        for (const { contract } of catalog.registry().list()) mcp.approve(contract);
      };
      approveCurrent();
      catalog.onChange((change) => {
        if (change.current) approveCurrent();
      });
    }
    await mcp?.start();
    const invoker = new ToolInvoker({
      inProcess: new Map(definitions.map((d) => [d.contract.name, d])),
      ...(http ? { http } : {}),
      ...(mcp ? { mcp } : {}),
      shutdown: shutdown.signal,
    });
    const operationStore = new MongoOperationStore(infra.db);
    const tracker = new OperationTracker({
      store: operationStore,
      bus: infra.bus,
      contracts: catalog,
      invoker,
      recordEvidence,
      defaults: {
        pollMs: config.EXECUTOR_OPERATION_POLL_MS,
        maxDurationMs: config.EXECUTOR_OPERATION_MAX_MS,
        reconcileDelayMs: config.EXECUTOR_RECONCILE_DELAY_MS,
        reconcilePollMs: config.EXECUTOR_OPERATION_POLL_MS,
        reconcileMaxMs: config.EXECUTOR_RECONCILE_MAX_MS,
      },
      logger,
      reconciliations: measured.reconciliations,
    });
    operations.tracker = tracker;
    const keys = new MongoIdempotencyStore(infra.db);
    const leases = new LeaseKeeper({ store: keys, owner: config.INSTANCE_ID, leaseMs: config.EXECUTOR_LIVE_LEASE_MS, logger });

    const worker = await infra.bus.consume(
      {
        // One durable consumer shared by every executor replica.
        name: "executor",
        filters: [infra.subjects.callEvents("authorized")],
        slots: config.EXECUTOR_SLOTS,
        maxAckPending: config.EXECUTOR_MAX_ACK_PENDING,
        ackWaitMs: config.EXECUTOR_ACK_WAIT_MS,
        // Unbounded on the server: deliveries to an executor that died or stalled must not use up a call's last
        // delivery unseen. The handler bounds them: delivery EXECUTOR_MAX_DELIVER runs no tool and ends the call.
        maxDeliver: -1,
        step: { step: "execution", name: (event) => `execute_tool ${event.tool?.name ?? "unknown"}`, attributes: { "gen_ai.operation.name": "execute_tool" } },
      },
      executorHandler({
        bus: infra.bus,
        contracts: catalog,
        invoker,
        store: keys,
        operations: tracker,
        verifier,
        approvals: new MongoApprovalStore(infra.db),
        evidence,
        deadLetters: infra.db.collection<DeadLetterRecord>("dead_letters"),
        executorId: config.INSTANCE_ID,
        leaseMarginMs: config.EXECUTOR_LEASE_MARGIN_MS,
        leases,
        maxDeliveries: config.EXECUTOR_MAX_DELIVER,
        maxAbandonedAttempts: config.EXECUTOR_MAX_ABANDONED_ATTEMPTS,
        logger,
        metrics: measured,
      }),
    );
    const operationsWorker = await infra.bus.consume(
      {
        name: "executor_ops",
        filters: [infra.subjects.callEvents("operation_updated")],
        slots: config.EXECUTOR_OPERATION_SLOTS,
        maxAckPending: config.EXECUTOR_OPERATION_SLOTS * 8,
        ackWaitMs: config.EXECUTOR_ACK_WAIT_MS,
        // Each poll is a redelivery; an operation's deadline, not a delivery count, bounds it.
        maxDeliver: -1,
      },
      tracker.handler,
    );

    // Explicit retention (no TTL indexes): each replica purges; purges are idempotent.
    const purge = async (): Promise<void> => {
      const before = new Date(Date.now() - config.EXECUTOR_RETENTION_MS);
      const [purgedKeys, purgedOperations] = await Promise.all([keys.purgeCompleted(before), operationStore.purgeFinished(before)]);
      if (purgedKeys + purgedOperations > 0) logger.info({ keys: purgedKeys, operations: purgedOperations }, "purged past retention");
    };
    const purgeTimer =
      config.EXECUTOR_PURGE_INTERVAL_MS > 0
        ? setInterval(() => void purge().catch((error: unknown) => logger.warn({ err: error }, "purge failed")), config.EXECUTOR_PURGE_INTERVAL_MS)
        : undefined;
    purgeTimer?.unref();

    // The executor has no API: its port, when configured, serves only its metrics.
    const metricsServer = config.HTTP_PORT === undefined ? undefined : await serveMetrics(metrics, { host: config.HTTP_HOST, port: config.HTTP_PORT });
    logger.info(
      {
        tools: registry.list().map((t) => ({ ...t.ref, runnable: invoker.refusal(t) ?? true })),
        http_origins: Object.keys(config.EXECUTOR_HTTP_ENDPOINTS),
        mcp_servers: Object.keys(config.EXECUTOR_MCP_SERVERS),
        faults: config.EXECUTOR_FAULTS ?? null,
      },
      "executor configured",
    );
    return {
      ...(metricsServer ? { httpPort: metricsServer.port } : {}),
      async stop() {
        clearInterval(purgeTimer);
        await metricsServer?.close();
        // Finish what is running (tools keep their own timeouts), then release the connections.
        await Promise.all([worker.stop(), operationsWorker.stop()]);
        leases.close();
        shutdown.abort();
        await Promise.all([http?.close(), mcp?.close()]);
        catalog.close();
        await infra.close();
      },
    };
  },
});
