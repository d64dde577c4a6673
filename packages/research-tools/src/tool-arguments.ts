import type { JsonValue } from "@toolgate/contracts";
import type { ToolOutcome } from "@toolgate/registry";

/**
 * The string at `args[name]`, or undefined. The registry validated the arguments before the handler runs;
 * these readers only narrow types and let a handler refuse a call that bypassed validation.
 */
export function stringArgument(args: Record<string, JsonValue>, name: string): string | undefined {
  const value = args[name];
  return typeof value === "string" ? value : undefined;
}

/** The integer at `args[name]`, or undefined. */
export function integerArgument(args: Record<string, JsonValue>, name: string): number | undefined {
  const value = args[name];
  return typeof value === "number" && Number.isInteger(value) ? value : undefined;
}

/** The failure a handler returns for arguments its schema should have rejected. */
export function invalidArguments(message: string): ToolOutcome {
  return { ok: false, code: "INVALID_ARGUMENTS", message, retryable: false };
}

/** The failure a handler returns when its signal aborted before it had any effect. */
export function cancelled(): ToolOutcome {
  return { ok: false, code: "TIMEOUT", message: "the call was cancelled before it finished", retryable: true };
}
