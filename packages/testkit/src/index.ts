export { startInfra, type TestInfra, type InfraTeardown } from "./infra.js";
export { connectTestBus, testInfra, testDatabase } from "./test-infra.js";
export { uniqueName } from "./names.js";
export { waitFor } from "./wait-for.js";
export { ServiceProcess, REPO_ROOT, type ServiceName, type LogLine, type ServiceStats } from "./service-process.js";
export { Stack, STACK_USERS, type StackOptions, type StackPrincipal, type RunView, type AuditedEvent, type SigningService } from "./stack.js";
export {
  callTool,
  callTools,
  resultOf,
  callEvents,
  waitForCallEvents,
  settledCallEvents,
  eventTrail,
  type CallResult,
  type SubmittedCall,
  type CallOptions,
} from "./tool-calls.js";
export { FakeProviders, type FakeDialect, type RecordedRequest } from "./fake-providers.js";
export { OtlpReceiver, type ReceivedSpan, type SpanAttributeValue } from "./otlp-receiver.js";
export { ExecutorDriver, type DrivenResult } from "./executor-driver.js";
export { PrivateNats, PrivateNatsCluster, PrivateNatsNode, PrivateFerretDb, freePort, type PrivateIdentities } from "./private-servers.js";
