import { ACK, type Delivery, type Disposition, type EventHandler } from "@toolgate/bus";
import type { ToolgateEvent, TrustedKeys } from "@toolgate/contracts";
import { signatureVerdict, type AuditStore } from "@toolgate/storage";
import type { Logger } from "@toolgate/telemetry";
import { redactEvent, type ToolLookup } from "./redact.js";

const encoder = new TextEncoder();

/**
 * Stores every event once (redacted) with the verdict on its signature, checked before redaction, and
 * acknowledges it only after it is durable. An event not signed by its owner's key is stored as refused (under
 * an id of its own), listed with the rejected messages and raised as an alert: nothing else acts on it.
 */
export function auditHandler(deps: { store: AuditStore; tools: ToolLookup; keys: TrustedKeys; logger: Logger }): EventHandler {
  return async (event: ToolgateEvent, delivery: Delivery): Promise<Disposition> => {
    const stored = redactEvent(event, deps.tools);
    const trust = signatureVerdict(deps.keys, event, stored !== event);
    if (!trust.ok) {
      deps.logger.error(
        {
          alert: "untrusted_event",
          event_id: event.id,
          type: event.type,
          subject: delivery.subject,
          stream_seq: delivery.streamSeq,
          problem: trust.problem,
          detail: trust.detail,
        },
        "ALERT: an event not signed by the service that owns it was published; stored as refused",
      );
      await deps.store.recordRejected(
        { reason: "untrusted", detail: `${trust.problem}: ${trust.detail}` },
        { subject: delivery.subject, streamSeq: delivery.streamSeq, data: encoder.encode(JSON.stringify(stored)) },
      );
    }
    const outcome = await deps.store.append(stored, delivery.streamSeq, trust);
    if (outcome === "duplicate") deps.logger.debug({ event_id: event.id }, "event already stored");
    return ACK;
  };
}
