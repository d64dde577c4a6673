export {
  ACK,
  retryLater,
  terminate,
  ackAction,
  backoffDelay,
  serverMaxDeliver,
  UNREACHABLE_RETRY_MS,
  type Disposition,
  type AckAction,
  type DeliveryAttempt,
} from "./disposition.js";
export type {
  ConsumerLag,
  EventBus,
  Subscription,
  EventHandler,
  RejectionHandler,
  ConsumerSpec,
  StepSpan,
  Worker,
  Delivery,
  PublishReceipt,
} from "./event-bus.js";
export { NatsEventBus, PublishError, type NatsEventBusOptions, type StreamSettings } from "./nats-event-bus.js";
export { eventAttributes } from "./event-spans.js";
export { ClaimLedger, type ClaimLedgerOptions, type LedgerClaim } from "./claim-ledger.js";
export { unreachableDependency, type Unreachable } from "./unreachable.js";
export { unprocessableValue, type Unprocessable } from "./unprocessable.js";
export {
  NATS_GUARDS,
  SAFE_NATS_VERSION,
  NatsVersionError,
  StreamSettingsError,
  NatsSyncError,
  compareVersions,
  type NatsGuard,
  type NatsRefusal,
} from "./server-guards.js";
export {
  NATS_ROLES,
  natsPermissions,
  generateNatsIdentities,
  natsIdentitiesFromSeeds,
  natsAuthorizationConfig,
  seedAuthenticator,
  parseNatsSeeds,
  type NatsRole,
  type NatsIdentity,
  type NatsPermissions,
  type AuthorizationOptions,
} from "./nats-identities.js";
