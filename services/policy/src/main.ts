import { MongoApprovalStore } from "@toolgate/approvals";
import { ACK, terminate } from "@toolgate/bus";
import { decisionSigner } from "@toolgate/contracts";
import { Authenticator } from "@toolgate/identity";
import { connectContractCatalog, connectInfrastructure, runService } from "@toolgate/service-runtime";
import { ApprovalDesk } from "./approval-desk.js";
import { CedarPolicies } from "./cedar-policies.js";
import { loadConfig } from "./config.js";
import { policyApi } from "./http-api.js";
import { policyMetrics } from "./metrics.js";
import { policyDirFingerprint, readPolicyDir } from "./policy-bundle.js";
import { policyHandler } from "./policy-worker.js";
import { MongoQuotaCounter } from "./quota-counter.js";

const config = loadConfig(process.env);

await runService({
  name: "policy",
  config,
  async start({ logger, stats, metrics, tracing }) {
    const signer = decisionSigner(config.POLICY_SIGNING_KEY);
    let fingerprint = policyDirFingerprint(config.POLICY_DIR);
    // A policy set that does not load stops the start: no decision is ever made without one.
    let policies = CedarPolicies.compile(readPolicyDir(config.POLICY_DIR));
    const reloader = setInterval(() => {
      const now = policyDirFingerprint(config.POLICY_DIR);
      if (now === fingerprint) return;
      fingerprint = now;
      try {
        const bundle = readPolicyDir(config.POLICY_DIR);
        if (bundle.version === policies.version) return;
        policies = CedarPolicies.compile(bundle);
        logger.info({ policy_version: policies.version }, "policy reloaded");
      } catch (error) {
        // A bad edit keeps the previous set in force rather than denying or allowing everything.
        logger.error({ err: error, policy_version: policies.version }, "policy reload failed; keeping the previous policy");
      }
    }, config.POLICY_RELOAD_MS);
    reloader.unref();

    const infra = await connectInfrastructure("policy", config, { logger, stats, tracing, metrics });
    const contracts = await connectContractCatalog(infra.bus, infra.subjects, {
      replicas: config.STREAM_REPLICAS,
      logger,
    });
    const store = new MongoApprovalStore(infra.db);
    const quotas = new MongoQuotaCounter(infra.db);
    await Promise.all([store.ensureIndexes(), quotas.ensureIndexes()]);
    const desk = new ApprovalDesk({
      traces: tracing.runs,
      store,
      bus: infra.bus,
      contracts,
      policies: () => policies,
      signer,
      requestTtlMs: config.POLICY_APPROVAL_TTL_MS,
      grantTtlMs: config.POLICY_APPROVAL_GRANT_TTL_MS,
      logger,
    });
    const measured = policyMetrics(metrics, desk);
    const worker = await infra.bus.consume(
      {
        name: "policy",
        filters: [infra.subjects.callEvents("proposed")],
        slots: config.POLICY_SLOTS,
        maxAckPending: config.POLICY_MAX_ACK_PENDING,
        ackWaitMs: config.BUS_ACK_WAIT_MS,
        maxDeliver: 20,
        step: { step: "policy_decision", name: () => "policy_decision" },
      },
      policyHandler({
        bus: infra.bus,
        contracts,
        policies: () => policies,
        signer,
        decisionTtlMs: config.POLICY_DECISION_TTL_MS,
        quotas,
        desk,
        logger,
        decisions: measured.decisions,
      }),
    );

    // A run that stops withdraws its calls' open approval requests, so none of them can run after the stop.
    const runStops = await infra.bus.consume(
      {
        name: "policy-run-stops",
        filters: [infra.subjects.runEvents("stopped")],
        slots: 4,
        maxAckPending: 256,
        ackWaitMs: config.BUS_ACK_WAIT_MS,
        maxDeliver: 20,
      },
      async (event) => {
        if (event.kind !== "run" || event.type !== "stopped") return terminate(`policy does not handle ${event.kind}.${event.type} here`);
        await desk.withdrawRun(event.run_id, event.payload.reason);
        return ACK;
      },
    );

    // A call its caller cancelled (the orchestrator's `cancel_requested`) has its approval request withdrawn: the
    // orchestrator owns calls, policy owns approval requests, so the orchestrator asks and policy decides.
    const callCancels = await infra.bus.consume(
      {
        name: "policy-call-cancels",
        filters: [infra.subjects.callEvents("cancel_requested")],
        slots: 4,
        maxAckPending: 256,
        ackWaitMs: config.BUS_ACK_WAIT_MS,
        maxDeliver: 20,
      },
      async (event) => {
        if (event.kind !== "call" || event.type !== "cancel_requested") return terminate(`policy does not handle ${event.kind}.${event.type} here`);
        await desk.withdrawCall(event.call_id, event.principal, event.payload.reason);
        return ACK;
      },
    );

    let sweeping = false;
    let sweeps = 0;
    const sweeper = setInterval(() => {
      if (sweeping) return;
      sweeping = true;
      const purge = ++sweeps % 600 === 0;
      desk
        .sweep()
        .then(async (swept) => {
          if (swept.expired + swept.republished > 0) logger.info(swept, "approvals swept");
          if (purge) {
            const before = new Date(Date.now() - config.POLICY_RETENTION_MS);
            await Promise.all([store.purge(before), quotas.purge(new Date(Date.now() - 60_000))]);
          }
        })
        .catch((error: unknown) => logger.warn({ err: error }, "approval sweep failed"))
        .finally(() => (sweeping = false));
    }, config.POLICY_SWEEP_MS);

    const authenticator = await Authenticator.create({ apiKeys: config.POLICY_API_KEYS, issuers: config.POLICY_JWT_ISSUERS });
    const api = policyApi({ desk, authenticator, metrics, logger });
    await api.listen({ host: config.HTTP_HOST, port: config.HTTP_PORT });
    const address = api.server.address();
    logger.info(
      {
        tools: contracts
          .registry()
          .list()
          .map((t) => t.ref),
        policy_version: policies.version,
        key_id: signer.keyId,
        policy_dir: config.POLICY_DIR,
      },
      "policy configured",
    );
    return {
      httpPort: typeof address === "object" && address ? address.port : config.HTTP_PORT,
      async stop() {
        clearInterval(reloader);
        clearInterval(sweeper);
        await api.close();
        await Promise.all([worker.stop(), runStops.stop(), callCancels.stop()]);
        contracts.close();
        await infra.close();
      },
    };
  },
});
