import type { ResultEnvelope } from "@toolgate/contracts";

/** One tool call as the model proposed it (its own id and raw JSON arguments). */
export interface ProposedToolCall {
  id: string;
  name: string;
  arguments: string;
}

/**
 * What a model turn produced, with the tokens the provider reports for it (input plus output) and the model
 * snapshot it says answered (`modelVersion`), if any.
 */
export type ModelResponse = (
  { kind: "tool_calls"; calls: ProposedToolCall[]; text?: string } | { kind: "final"; text: string } | { kind: "refusal"; text: string }
) & { tokens?: number; modelVersion?: string };

/**
 * The conversation as the model sees it. Tool results come back under the model's own call ids; `content`
 * is what a provider receives: the result wrapped as data with its provenance (see transcript.ts).
 */
export type TranscriptItem =
  | { role: "user"; text: string }
  | { role: "assistant"; response: ModelResponse }
  | { role: "tool"; call_id: string; name: string; result: ResultEnvelope; content: string };

/** A model adapter: provider SDKs and the scripted test model implement it. */
export interface ModelAdapter {
  readonly name: string;
  respond(transcript: readonly TranscriptItem[]): Promise<ModelResponse>;
}
