import { REDACTED, type CompiledTool, type ToolRegistry } from "@toolgate/registry";
import type { JsonValue, ResultEnvelope, ToolgateEvent } from "@toolgate/contracts";

/**
 * The compiled tool an event is about: the exact contract version when its hash is known (an authorized or
 * executed call), else the current version of the tool with that name (a proposal).
 */
export type ToolLookup = (tool: string, hash?: string) => CompiledTool | undefined;

/** Tools from a registry source that may change while running (the contract catalog). */
export function catalogTools(catalog: { registry(): ToolRegistry; get(hash: string): CompiledTool | undefined }): ToolLookup {
  return (tool, hash) => (hash ? catalog.get(hash) : undefined) ?? catalog.registry().get(tool);
}

/**
 * Returns the event with everything its contract marks sensitive redacted, before anything is stored or
 * logged: argument fields of proposals and authorizations (unparseable arguments of such a tool whole), and
 * result fields of completions, reconciliations and finished operations.
 */
export function redactEvent(event: ToolgateEvent, tools: ToolLookup): ToolgateEvent {
  if (event.kind !== "call") return event;
  switch (event.type) {
    case "proposed": {
      const tool = tools(event.payload.tool_name);
      if (!tool?.redacts.arguments) return event;
      let args: unknown;
      try {
        args = JSON.parse(event.payload.arguments_json);
      } catch {
        return { ...event, payload: { ...event.payload, arguments_json: JSON.stringify(REDACTED) } };
      }
      const redacted = isRecord(args) ? tool.redactArguments(args) : REDACTED;
      return { ...event, payload: { ...event.payload, arguments_json: JSON.stringify(redacted) } };
    }
    case "authorized": {
      const tool = tools(event.payload.decision.tool.name, event.payload.decision.tool.hash);
      if (!tool?.redacts.arguments) return event;
      return { ...event, payload: { ...event.payload, arguments: tool.redactArguments(event.payload.arguments) } };
    }
    case "completed": {
      const result = redactedResult(event, event.payload.result, tools);
      return result === event.payload.result ? event : { ...event, payload: { ...event.payload, result } };
    }
    case "reconciled": {
      const result = redactedResult(event, event.payload.result, tools);
      return result === event.payload.result ? event : { ...event, payload: { ...event.payload, result } };
    }
    case "operation_updated": {
      const result = event.payload.result && redactedResult(event, event.payload.result, tools);
      return result === event.payload.result ? event : { ...event, payload: { ...event.payload, result } };
    }
    default:
      return event;
  }
}

function redactedResult(event: ToolgateEvent, result: ResultEnvelope, tools: ToolLookup): ResultEnvelope {
  if (!result.ok || event.tool === undefined) return result;
  const tool = tools(event.tool.name, event.tool.hash);
  return tool?.redacts.results ? { ...result, data: tool.redactResult(result.data) } : result;
}

function isRecord(value: unknown): value is Record<string, JsonValue> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
