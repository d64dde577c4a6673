import { NATS_GUARDS, type NatsGuard } from "@toolgate/bus";
import { MONGO_GUARDS, type MongoGuard } from "@toolgate/storage";
import type { Logger } from "@toolgate/telemetry";

/** Every start-up guard, by the name `TOOLGATE_UNSAFE_ALLOW` lists to let a development setup start anyway. */
export const UNSAFE_GUARDS = [...NATS_GUARDS, ...MONGO_GUARDS, "unsigned-events"] as const;
export type UnsafeGuard = NatsGuard | MongoGuard | "unsigned-events";

/**
 * A service without event keys: with no trust list it would act on events anyone with publish rights forged, and
 * without a signing key its own events are refused by every peer that checks.
 */
export class UnsignedEventsError extends Error {
  readonly code = "EVENT_KEYS_MISSING";
  readonly guard = "unsigned-events";
  readonly overridable = true;
  constructor(readonly setting: "EVENT_TRUSTED_KEYS" | "EVENT_SIGNING_KEY") {
    super(
      setting === "EVENT_TRUSTED_KEYS"
        ? "EVENT_TRUSTED_KEYS is not set: events would be acted on without checking who signed them"
        : "EVENT_SIGNING_KEY is not set: this service's events would be unsigned, and refused by every service that checks",
    );
    this.name = "UnsignedEventsError";
  }
}

/**
 * What every guard's error has (`NatsVersionError`, `StreamSettingsError`, `NatsSyncError`,
 * `WriteConcernError`): a code, the guard's name, the setting it names, and whether an override may pass it.
 */
export interface UnsafeSettingRefusal extends Error {
  readonly code: string;
  readonly guard: UnsafeGuard;
  readonly setting: string;
  readonly overridable: boolean;
}

/** Whether `error` is a start-up guard's refusal. */
export function isUnsafeSettingRefusal(error: unknown): error is UnsafeSettingRefusal {
  if (!(error instanceof Error)) return false;
  const guard = (error as Partial<UnsafeSettingRefusal>).guard;
  return (
    typeof guard === "string" && (UNSAFE_GUARDS as readonly string[]).includes(guard) && typeof (error as Partial<UnsafeSettingRefusal>).setting === "string"
  );
}

/**
 * The override the bus and the store ask about each refusal: true (after a warning naming the setting) for
 * a guard listed in `allowed`, false — refuse — for any other.
 */
export function unsafeOverride(allowed: readonly UnsafeGuard[], logger: Logger): (refusal: UnsafeSettingRefusal) => boolean {
  return (refusal) => {
    if (!allowed.includes(refusal.guard)) return false;
    logger.warn(
      { code: refusal.code, guard: refusal.guard, setting: refusal.setting },
      `unsafe setting allowed by TOOLGATE_UNSAFE_ALLOW (development only): ${refusal.message}`,
    );
    return true;
  };
}
