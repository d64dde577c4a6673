import type { JsonValue, ToolgateEvent } from "@toolgate/contracts";
import type { ToolContractInput } from "@toolgate/registry";

export const REDACTED = "[REDACTED]";

/** JSON pointers of sensitive argument fields, per tool name. */
export type SensitiveFields = ReadonlyMap<string, readonly string[]>;

/** Reads the sensitive-field declarations of the given contracts. */
export function sensitiveFields(contracts: readonly ToolContractInput[]): SensitiveFields {
  return new Map(contracts.filter((c) => (c.sensitive ?? []).length > 0).map((c) => [c.name, c.sensitive ?? []]));
}

/**
 * Returns the event with every argument field its contract marks sensitive replaced by "[REDACTED]",
 * before anything is stored or logged. Unparseable arguments of such a tool are redacted whole.
 */
export function redactEvent(event: ToolgateEvent, sensitive: SensitiveFields): ToolgateEvent {
  if (event.kind !== "call") return event;
  if (event.type === "proposed") {
    const pointers = sensitive.get(event.payload.tool_name);
    if (!pointers) return event;
    let args: JsonValue;
    try {
      args = JSON.parse(event.payload.arguments_json) as JsonValue;
    } catch {
      return { ...event, payload: { ...event.payload, arguments_json: JSON.stringify(REDACTED) } };
    }
    return { ...event, payload: { ...event.payload, arguments_json: JSON.stringify(redactPointers(args, pointers)) } };
  }
  if (event.type === "authorized") {
    const pointers = sensitive.get(event.payload.decision.tool.name);
    if (!pointers) return event;
    return { ...event, payload: { ...event.payload, arguments: redactPointers(event.payload.arguments, pointers) as Record<string, JsonValue> } };
  }
  return event;
}

function redactPointers(value: JsonValue, pointers: readonly string[]): JsonValue {
  const copy = structuredClone(value);
  for (const pointer of pointers) {
    const tokens = pointer
      .split("/")
      .slice(1)
      .map((t) => t.replace(/~1/g, "/").replace(/~0/g, "~"));
    const last = tokens.pop();
    if (last === undefined) return REDACTED;
    let parent: JsonValue | undefined = copy;
    for (const t of tokens) parent = parent !== null && typeof parent === "object" ? (parent as Record<string, JsonValue>)[t] : undefined;
    if (parent !== null && typeof parent === "object" && Object.hasOwn(parent, last)) (parent as Record<string, JsonValue>)[last] = REDACTED;
  }
  return copy;
}
