export type { ModelAdapter, ModelResponse, TranscriptItem, ProposedToolCall } from "./model.js";
export { scriptedModel, SCENARIOS, type Scenario } from "./scripted-model.js";
export { providerModel, ModelProviderSchema, ModelResponseError, type ModelProvider, type ContractSource } from "./provider-models.js";
export { evalModelRespond, planOf, instructionsIn, type EvalModelKind } from "./eval-models.js";
