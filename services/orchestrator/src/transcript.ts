import type { TranscriptItem } from "@toolgate/models";
import { observationText, type Provenance } from "@toolgate/providers";
import type { ToolRegistry } from "@toolgate/registry";
import type { CallResultRecord, RunRecord } from "./run-store.js";

/**
 * Where a result came from, as the model is told: tool (as the model named it), contract version, whether its
 * content is untrusted. A name the model used is looked up as the registry resolves it, aliases included.
 */
export function provenanceOf(tool: string, registry: ToolRegistry): Provenance {
  const compiled = registry.get(tool);
  // A tool the registry no longer knows is treated as untrusted: nothing vouches for its output.
  return { tool, contract_version: compiled?.contract.version ?? "unknown", untrusted: compiled?.untrustedOutput ?? true };
}

/**
 * The conversation so far, as a model adapter sends it: the run's input, each response, and each result as an
 * observation wrapped as data with its provenance, size-limited. Tool output never enters instructions.
 */
export function transcriptOf(run: RunRecord, results: readonly CallResultRecord[], registry: ToolRegistry): TranscriptItem[] {
  const byCall = new Map(results.map((r) => [r._id, r]));
  const items: TranscriptItem[] = [{ role: "user", text: run.input }];
  for (const turn of [...run.responses].sort((a, b) => a.turn - b.turn)) {
    items.push({ role: "assistant", response: turn.response });
    for (const callId of turn.call_ids) {
      const r = byCall.get(callId);
      if (!r) continue;
      items.push({
        role: "tool",
        call_id: r.provider_call_id,
        // The name the model called, an alias included: providers that answer by name (Gemini) answer under it.
        name: r.tool_name,
        result: r.result,
        content: observationText(r.result, provenanceOf(r.tool_name, registry)),
      });
    }
  }
  return items;
}
