import { ClaimLedger } from "@toolgate/bus";
import { TERMINAL_CALL_EVENT_TYPES } from "@toolgate/contracts";
import { Authenticator } from "@toolgate/identity";
import { connectContractCatalog, connectInfrastructure, runService } from "@toolgate/service-runtime";
import type { Budgets } from "./budgets.js";
import { CallScheduler } from "./call-scheduler.js";
import { CallWaiters } from "./call-waiters.js";
import { RunWaiters } from "./run-waiters.js";
import { loadConfig } from "./config.js";
import { orchestratorApi } from "./http-api.js";
import { McpFrontDoor } from "./mcp-front-door.js";
import { McpHttpPolicy } from "./mcp-http.js";
import { McpSessions } from "./mcp-sessions.js";
import { orchestratorMetrics } from "./metrics.js";
import type { ModelAdapter } from "@toolgate/models";
import type { ToolContractInput } from "@toolgate/registry";
import { ResourceLocks } from "./resource-locks.js";
import { RunLoop } from "./run-loop.js";
import { RunStore } from "./run-store.js";
import { RunTimeline } from "./run-timeline.js";
import { MongoRequestIdempotencyStore } from "@toolgate/storage";
import { HostIdempotency } from "./host-idempotency.js";
import { Availability } from "./outage.js";
import { Admission } from "./admission.js";
import { providerModel, scriptedModel } from "@toolgate/models";

const config = loadConfig(process.env);

/**
 * Model adapters by name: `scripted:<scenario>` for the deterministic test and demo model, `<provider>:<model>`
 * for a configured provider (its official SDK, offered the current contracts in its own format).
 */
function modelAdapters(contracts: () => readonly ToolContractInput[]): (name: string) => ModelAdapter | undefined {
  const adapters = new Map<string, ModelAdapter>();
  return (name) => {
    const cached = adapters.get(name);
    if (cached) return cached;
    const split = name.indexOf(":");
    const [prefix, model] = split < 0 ? [name, ""] : [name.slice(0, split), name.slice(split + 1)];
    let adapter: ModelAdapter | undefined;
    if (prefix === "scripted") adapter = scriptedModel(model);
    else {
      const provider = config.MODEL_PROVIDERS.find((p) => p.name === prefix);
      if (provider && model) adapter = providerModel(provider, model, contracts);
    }
    if (adapter) adapters.set(name, adapter);
    return adapter;
  };
}

const defaultBudgets: Budgets = {
  max_turns: config.RUN_MAX_TURNS,
  max_tool_calls: config.RUN_MAX_TOOL_CALLS,
  max_wall_clock_ms: config.RUN_MAX_WALL_CLOCK_MS,
  max_tokens: config.RUN_MAX_TOKENS,
  max_identical_calls: config.RUN_MAX_IDENTICAL_CALLS,
  max_approval_wait_ms: config.RUN_MAX_APPROVAL_WAIT_MS,
};

await runService({
  name: "orchestrator",
  config,
  async start({ logger, stats, metrics, tracing }) {
    const measured = orchestratorMetrics(metrics);
    const infra = await connectInfrastructure("orchestrator", config, { logger, stats, tracing, metrics });
    const contracts = await connectContractCatalog(infra.bus, infra.subjects, {
      replicas: config.STREAM_REPLICAS,
      logger,
    });
    const store = new RunStore(infra.db);
    await store.ensureIndexes();
    // Provider call ids are claimed on a JetStream ledger next to the events (see HostCallKeys).
    const ledger = await ClaimLedger.open(infra.bus, {
      stream: `${infra.subjects.stream.replace(/_EVENTS$/, "")}_HOST_CALLS`,
      subjectPrefix: `${infra.subjects.prefix}.host_calls`,
      replicas: config.STREAM_REPLICAS,
      maxValueBytes: 16 * 1024,
      stats,
    });
    const waiters = new CallWaiters({ store, bus: infra.bus, subjects: infra.subjects });
    const runWaiters = new RunWaiters({ bus: infra.bus, subjects: infra.subjects });
    const scheduler = new CallScheduler({ store, bus: infra.bus, locks: new ResourceLocks(infra.db), logger, traces: tracing.runs });
    // What a model is offered: enabled tools, never a quarantined definition.
    const models = modelAdapters(() => contracts.offeredTools().map((t) => t.contract));
    const loop = new RunLoop({
      store,
      bus: infra.bus,
      ledger,
      contracts,
      scheduler,
      models,
      waiters,
      defaultBudgets,
      instanceId: config.INSTANCE_ID,
      logger,
      orphans: { lookbackMs: config.ORCHESTRATOR_ORPHAN_LOOKBACK_MS, graceMs: config.ORCHESTRATOR_ORPHAN_GRACE_MS },
      callRecordDelayMs: config.ORCHESTRATOR_CALL_RECORD_DELAY_MS,
      metrics: measured,
      traces: tracing.runs,
    });
    const worker = await infra.bus.consume(
      {
        name: "orchestrator",
        // One durable for every terminal event type (several filter subjects per consumer: NATS 2.10+).
        filters: TERMINAL_CALL_EVENT_TYPES.map((t) => infra.subjects.callEvents(t)),
        slots: config.ORCHESTRATOR_SLOTS,
        maxAckPending: config.ORCHESTRATOR_MAX_ACK_PENDING,
        ackWaitMs: config.BUS_ACK_WAIT_MS,
        maxDeliver: 20,
        step: { step: "attach", name: () => "attach_result" },
      },
      loop.onTerminal,
    );
    const approvals = await infra.bus.consume(
      {
        name: "orchestrator_approvals",
        filters: [infra.subjects.callEvents("approval_requested")],
        slots: 16,
        maxAckPending: 1_024,
        ackWaitMs: config.BUS_ACK_WAIT_MS,
        maxDeliver: 20,
      },
      loop.onApprovalRequested,
    );
    const resumed = await loop.resume();
    let sweeps = 0;
    let sweeping = false;
    const sweeper = setInterval(() => {
      if (sweeping) return;
      sweeping = true;
      // Every 20th sweep also picks up runs that other (perhaps dead) replicas were watching; every 4th proposes
      // calls recorded but never proposed (it reads only what was recorded since the last time).
      sweeps += 1;
      loop
        .sweep(sweeps % 20 === 0, sweeps % 4 === 0)
        .catch((error: unknown) => logger.warn({ err: error }, "sweep failed"))
        .finally(() => (sweeping = false));
    }, config.ORCHESTRATOR_SWEEP_MS);
    const authenticator = await Authenticator.create({ apiKeys: config.ORCHESTRATOR_API_KEYS, issuers: config.ORCHESTRATOR_JWT_ISSUERS });
    const keys = new MongoRequestIdempotencyStore(infra.db);
    await keys.ensureIndexes();
    const idempotency = new HostIdempotency({
      store: keys,
      owner: config.INSTANCE_ID,
      leaseMs: config.ORCHESTRATOR_IDEMPOTENCY_LEASE_MS,
      retentionMs: config.ORCHESTRATOR_IDEMPOTENCY_RETENTION_MS,
      purgeMs: config.ORCHESTRATOR_IDEMPOTENCY_PURGE_MS,
      logger,
      decisions: measured.idempotency,
    });
    const availability = new Availability({
      nats: infra.bus.connection,
      db: infra.db,
      logger,
      probeMs: config.ORCHESTRATOR_PROBE_MS,
      probeTimeoutMs: config.ORCHESTRATOR_PROBE_TIMEOUT_MS,
      maxWaiting: config.ORCHESTRATOR_MAX_WAITING ?? 4 * config.ORCHESTRATOR_MAX_SUBMISSIONS,
    });
    const outage = { deadlineMs: config.ORCHESTRATOR_UNAVAILABLE_AFTER_MS, retryAfterS: config.ORCHESTRATOR_RETRY_AFTER_S };
    const sessions = new McpSessions(infra.db, { ttlMs: config.ORCHESTRATOR_MCP_SESSION_TTL_MS, purgeMs: config.ORCHESTRATOR_MCP_PURGE_MS, logger });
    await sessions.ensureIndexes();
    const mcp = new McpFrontDoor({
      loop,
      waiters,
      contracts,
      store,
      sessions,
      idempotency,
      bus: infra.bus,
      subjects: infra.subjects,
      approvalUrl: config.ORCHESTRATOR_APPROVAL_URL,
      outage,
      logger,
    });
    const mcpHttp = new McpHttpPolicy({
      allowedHosts: config.ORCHESTRATOR_MCP_ALLOWED_HOSTS,
      allowedOrigins: config.ORCHESTRATOR_MCP_ALLOWED_ORIGINS,
      publicUrl: config.ORCHESTRATOR_PUBLIC_URL,
      authorizationServers: config.ORCHESTRATOR_MCP_AUTHORIZATION_SERVERS ?? config.ORCHESTRATOR_JWT_ISSUERS.map((i) => i.issuer),
    });
    const admission = new Admission(
      config.ORCHESTRATOR_MAX_SUBMISSIONS,
      config.ORCHESTRATOR_MAX_WAITING === undefined ? {} : { maxWaiting: config.ORCHESTRATOR_MAX_WAITING },
    );
    const api = await orchestratorApi({
      loop,
      store,
      waiters,
      runWaiters,
      contracts,
      authenticator,
      mcp,
      mcpHttp,
      idempotency,
      availability,
      admission,
      outage,
      metrics,
      timeline: new RunTimeline({
        store,
        loop,
        bus: infra.bus,
        subjects: infra.subjects,
        contracts,
        ...(config.ORCHESTRATOR_AUDIT_URL ? { auditUrl: config.ORCHESTRATOR_AUDIT_URL } : {}),
      }),
      logger,
    });
    await api.listen({ host: config.HTTP_HOST, port: config.HTTP_PORT });
    const address = api.server.address();
    logger.info(
      {
        resumed_runs: resumed,
        tools: contracts
          .registry()
          .list()
          .map((t) => t.ref.name),
      },
      "orchestrator configured",
    );
    return {
      httpPort: typeof address === "object" && address ? address.port : config.HTTP_PORT,
      async stop() {
        clearInterval(sweeper);
        await api.close();
        idempotency.close();
        sessions.close();
        availability.close();
        waiters.close();
        runWaiters.close();
        await Promise.all([worker.stop(), approvals.stop()]);
        contracts.close();
        await infra.close();
      },
    };
  },
});
