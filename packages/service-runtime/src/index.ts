export { baseEnvShape, BaseEnvSchema, parseEnv, jsonEnv, listEnv, ConfigError, tracingOptions, type BaseConfig } from "./config.js";
export { connectInfrastructure, type Infrastructure } from "./infrastructure.js";
export { runService, type RunningService, type RunServiceOptions, type ServiceContext } from "./lifecycle.js";
export { connectContractCatalog } from "./contract-catalog.js";
export { UNSAFE_GUARDS, isUnsafeSettingRefusal, unsafeOverride, type UnsafeGuard, type UnsafeSettingRefusal } from "./start-up-guards.js";
export { PAGE_DOM_HELPERS } from "./page-helpers.js";
