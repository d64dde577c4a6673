export { testToolsetContracts, testToolsetDefinitions, TEST_TOOLSET_NAMES, type TestToolsetName, type TestToolsetDependencies } from "./test-toolsets.js";
export { benchContracts, benchTools, ExecutionCounter, type ExecutionReport } from "./bench-tools.js";
export { chaosContracts, chaosTools, CHAOS_HTTP_ORIGIN, MUTABLE_GREET_DEFINITION_HASH } from "./chaos-tools.js";
export { EffectLedger, duplicateEffects, type EffectRecord } from "./effect-ledger.js";
