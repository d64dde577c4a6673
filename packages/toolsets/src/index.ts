export { ToolsetNameSchema, toolsetContracts, toolsetDefinitions, type ToolsetName, type ToolsetDependencies } from "./toolsets.js";
export { benchContracts, benchTools } from "./bench-tools.js";
export { EffectLedger, duplicateEffects, type EffectRecord } from "./effect-ledger.js";
