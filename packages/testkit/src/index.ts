export { startInfra, type TestInfra, type InfraTeardown } from "./infra.js";
export { testInfra, testDatabase } from "./test-infra.js";
export { uniqueName } from "./names.js";
export { waitFor } from "./wait-for.js";
export { ServiceProcess, REPO_ROOT, type ServiceName, type LogLine } from "./service-process.js";
export { Stack, STACK_USERS, type StackOptions, type StackPrincipal, type RunView, type AuditedEvent } from "./stack.js";
