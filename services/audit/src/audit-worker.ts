import { ACK, type Delivery, type Disposition, type EventHandler } from "@toolgate/bus";
import type { ToolgateEvent } from "@toolgate/contracts";
import type { AuditStore } from "@toolgate/storage";
import type { Counter, Logger } from "@toolgate/telemetry";
import { redactEvent, type ToolLookup } from "./redact.js";

/**
 * Stores every event once (redacted), with the signature and digest it arrived with, and acknowledges it only after
 * it is durable. A service's report of a refused forgery is an alert: logged at error level and counted.
 */
export function auditHandler(deps: { store: AuditStore; tools: ToolLookup; logger: Logger; refusals?: Counter<"reporter" | "reason"> }): EventHandler {
  return async (event: ToolgateEvent, delivery: Delivery): Promise<Disposition> => {
    const outcome = await deps.store.append(redactEvent(event, deps.tools), delivery.streamSeq, delivery.signature);
    if (outcome === "duplicate")
      deps.logger.debug({ event_id: event.id, run_id: event.run_id, ...(event.kind === "call" ? { call_id: event.call_id } : {}) }, "event already stored");
    else if (event.type === "event_refused") {
      const { refused_event_id, refused_type, claimed_source, reason, key_id, stream_seq } = event.payload;
      deps.refusals?.inc({ reporter: event.source, reason });
      deps.logger.error(
        { alert: "forged_event", reporter: event.source, refused_event_id, refused_type, claimed_source, reason, key_id, stream_seq, run_id: event.run_id },
        "ALERT: an event not signed by its owner was refused",
      );
    }
    return ACK;
  };
}
