import type { NatsEventBus } from "@toolgate/bus";
import type { SubjectCatalogue } from "@toolgate/contracts";
import { ContractCatalog, type ToolContractInput } from "@toolgate/registry";
import type { Logger } from "@toolgate/telemetry";

/**
 * Connects the service to the contract catalog that shares its subject prefix (stream `<PREFIX>_CONTRACTS`,
 * subjects `<prefix>.contracts.<tool>.<hash>`). Only the executor, which links the tools' implementations,
 * passes a `seed`: the contracts of the tool sets it runs, published so that the catalog knows them; policy,
 * audit and the orchestrator know tools only from the catalog (and contracts published with
 * `toolgate-contracts publish`). Publishing the same content is a no-op; a different content under a published
 * name and version is refused and logged (publish a new version instead). Every service then validates and
 * executes against the catalog: new versions reach every replica without a restart, and a call is executed
 * only against the exact hash it was validated with. Throws `StreamSettingsError` when the catalog's stream
 * has other replicas or storage than configured (unless the bus was told to allow it).
 */
export async function connectContractCatalog(
  bus: NatsEventBus,
  subjects: SubjectCatalogue,
  options: { replicas: number; seed?: readonly ToolContractInput[]; logger: Logger },
): Promise<ContractCatalog> {
  const stream = `${subjects.stream.replace(/_EVENTS$/, "")}_CONTRACTS`;
  const catalog = await ContractCatalog.connect(bus.connection, {
    stream,
    subjectPrefix: `${subjects.prefix}.contracts`,
    replicas: options.replicas,
    onRejected: (rejection) => options.logger.warn({ rejection }, "contract catalog entry refused"),
  });
  try {
    // The catalog creates its stream when missing, but never rescales one that exists: the same guard as events.
    await bus.checkStreamSettings(stream, options.replicas);
  } catch (error) {
    catalog.close();
    throw error;
  }
  for (const contract of options.seed ?? []) {
    const outcome = await catalog.publish(contract);
    if (!outcome.ok)
      options.logger.error({ tool: contract.name, version: contract.version, code: outcome.code, message: outcome.message }, "built-in contract not published");
  }
  catalog.onChange((change) =>
    options.logger.info({ tool: change.ref, current: change.current, previous: change.previous ?? null }, "contract version loaded"),
  );
  return catalog;
}
