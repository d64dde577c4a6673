import type { ResultEnvelope } from "@toolgate/contracts";

/** One tool call as the model proposed it (its own id and raw JSON arguments). */
export interface ProposedToolCall {
  id: string;
  name: string;
  arguments: string;
}

/** What a model turn produced. */
export type ModelResponse =
  { kind: "tool_calls"; calls: ProposedToolCall[]; text?: string } | { kind: "final"; text: string } | { kind: "refusal"; text: string };

/** The conversation as the model sees it: tool results come back under the model's own call ids. */
export type TranscriptItem =
  { role: "user"; text: string } | { role: "assistant"; response: ModelResponse } | { role: "tool"; call_id: string; name: string; result: ResultEnvelope };

/** A model adapter: provider SDKs and the scripted test model implement it. */
export interface ModelAdapter {
  readonly name: string;
  respond(transcript: readonly TranscriptItem[]): Promise<ModelResponse>;
}
