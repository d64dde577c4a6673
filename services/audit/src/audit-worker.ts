import { ACK, type Delivery, type Disposition, type EventHandler } from "@toolgate/bus";
import type { ToolgateEvent } from "@toolgate/contracts";
import type { AuditStore } from "@toolgate/storage";
import type { Logger } from "@toolgate/telemetry";
import { redactEvent, type ToolLookup } from "./redact.js";

/** Stores every event once (redacted) and acknowledges it only after it is durable. */
export function auditHandler(deps: { store: AuditStore; tools: ToolLookup; logger: Logger }): EventHandler {
  return async (event: ToolgateEvent, delivery: Delivery): Promise<Disposition> => {
    const outcome = await deps.store.append(redactEvent(event, deps.tools), delivery.streamSeq);
    if (outcome === "duplicate") deps.logger.debug({ event_id: event.id }, "event already stored");
    return ACK;
  };
}
