import type { JsonValue, ToolgateEvent } from "@toolgate/contracts";
import type { CompiledTool, ToolRegistry } from "@toolgate/registry";

export const REDACTED = "[REDACTED]";

/**
 * JSON pointers of the sensitive argument fields of a tool: of the exact contract version when its hash is
 * known (an authorized call), else of the current version of the tool with that name (a proposal).
 */
export type SensitiveFields = (tool: string, hash?: string) => readonly string[] | undefined;

/** Sensitive fields from a registry source that may change while running (the contract catalog). */
export function catalogSensitiveFields(catalog: { registry(): ToolRegistry; get(hash: string): CompiledTool | undefined }): SensitiveFields {
  return (tool, hash) => {
    const contract = (hash ? catalog.get(hash) : undefined)?.contract ?? catalog.registry().get(tool)?.contract;
    return contract && contract.sensitive.length > 0 ? contract.sensitive : undefined;
  };
}

/**
 * Returns the event with every argument field its contract marks sensitive replaced by "[REDACTED]",
 * before anything is stored or logged. Unparseable arguments of such a tool are redacted whole.
 */
export function redactEvent(event: ToolgateEvent, sensitive: SensitiveFields): ToolgateEvent {
  if (event.kind !== "call") return event;
  if (event.type === "proposed") {
    const pointers = sensitive(event.payload.tool_name);
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
    const pointers = sensitive(event.payload.decision.tool.name, event.payload.decision.tool.hash);
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
