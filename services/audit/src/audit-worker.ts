import { ACK, type Delivery, type Disposition, type EventHandler } from "@toolgate/bus";
import type { ToolgateEvent, TrustedKeys } from "@toolgate/contracts";
import { signatureVerdict, type AuditStore } from "@toolgate/storage";
import type { Logger } from "@toolgate/telemetry";
import { redactEvent, type ToolLookup } from "./redact.js";

const encoder = new TextEncoder();

/**
 * Stores every event once (redacted) with its signature and the digest of the bytes it covers, read before
 * redaction, and acknowledges it only after it is durable. Signatures are verified when the chain is verified,
 * not here: ingestion keeps only the checks that cost no cryptography. An unsigned event, or one under a key
 * not trusted for the role that owns it, is stored as refused (under an id of its own), listed with the
 * rejected messages and raised as an alert.
 */
export function auditHandler(deps: { store: AuditStore; tools: ToolLookup; keys: TrustedKeys; logger: Logger }): EventHandler {
  return async (event: ToolgateEvent, delivery: Delivery): Promise<Disposition> => {
    const stored = redactEvent(event, deps.tools);
    const trust = signatureVerdict(deps.keys, event, delivery.data);
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
