import type { StreamInfo } from "@nats-io/jetstream";

/**
 * Start-up guards on the NATS deployment: each names a setting that makes acknowledged events losable.
 * The names are what `TOOLGATE_UNSAFE_ALLOW` lists to let a development setup start anyway.
 */
export const NATS_GUARDS = ["nats-version", "stream-settings", "nats-sync"] as const;
export type NatsGuard = (typeof NATS_GUARDS)[number];

/** Jepsen (2025) found acknowledged writes lost by 2.12.1 and earlier; 2.12.3 carries the fixes. */
export const SAFE_NATS_VERSION = "2.12.3";
/** Several filter subjects per consumer, which every Toolgate consumer may use, arrived in 2.10. */
export const MULTI_FILTER_NATS_VERSION = "2.10.0";

const overrideHint = (guard: NatsGuard) => `for development only, TOOLGATE_UNSAFE_ALLOW=${guard} starts anyway`;

/**
 * The server is older than Toolgate accepts. Below 2.10 it is never `overridable`: a consumer with several
 * filter subjects would be created without any filter there, and handed every event.
 */
export class NatsVersionError extends Error {
  readonly code = "NATS_VERSION_UNSAFE";
  readonly guard = "nats-version";
  readonly setting = "nats-server version";
  readonly overridable: boolean;
  constructor(
    readonly server: string,
    readonly version: string,
  ) {
    const overridable = compareVersions(version, MULTI_FILTER_NATS_VERSION) >= 0;
    super(
      overridable
        ? `nats-server ${version} (${server}) is older than ${SAFE_NATS_VERSION}, which fixed the acknowledged-write losses Jepsen found in 2.12.1: upgrade the server (${overrideHint("nats-version")})`
        : `nats-server ${version} (${server}) is older than ${MULTI_FILTER_NATS_VERSION}: Toolgate's consumers need several filter subjects per consumer; upgrade to ${SAFE_NATS_VERSION} or later (no override: this cannot work)`,
    );
    this.name = "NatsVersionError";
    this.overridable = overridable;
  }
}

/** The event stream exists with other replicas or storage than configured; Toolgate never changes either. */
export class StreamSettingsError extends Error {
  readonly code = "STREAM_SETTINGS_MISMATCH";
  readonly guard = "stream-settings";
  readonly overridable = true;
  constructor(
    readonly setting: "STREAM_REPLICAS" | "stream storage",
    message: string,
  ) {
    super(`${message} (${overrideHint("stream-settings")})`);
    this.name = "StreamSettingsError";
  }
}

/**
 * A server that holds the stream does not sync every write to disk before acknowledging it, or that could not
 * be verified (its monitoring endpoint is not configured or did not answer).
 */
export class NatsSyncError extends Error {
  readonly code = "NATS_SYNC_UNSAFE";
  readonly guard = "nats-sync";
  readonly setting = "sync_interval";
  readonly overridable = true;
  constructor(message: string, options?: ErrorOptions) {
    super(`${message} (${overrideHint("nats-sync")})`, options);
    this.name = "NatsSyncError";
  }
}

/** Every refusal the NATS guards raise. */
export type NatsRefusal = NatsVersionError | StreamSettingsError | NatsSyncError;

/**
 * Orders `major.minor.patch[-pre]` versions (a pre-release sorts before its release); negative when `a` is
 * older. Unparsable versions sort before every real one, so they are refused.
 */
export function compareVersions(a: string, b: string): number {
  const pa = parseVersion(a);
  const pb = parseVersion(b);
  if (!pa || !pb) return pa ? 1 : pb ? -1 : 0;
  for (let i = 0; i < 3; i++) {
    const d = pa.parts[i]! - pb.parts[i]!;
    if (d !== 0) return d;
  }
  return Number(pb.pre) - Number(pa.pre);
}

function parseVersion(version: string): { parts: number[]; pre: boolean } | undefined {
  const match = /^v?(\d+)\.(\d+)\.(\d+)(-.+)?$/.exec(version.trim());
  if (!match) return undefined;
  return { parts: [Number(match[1]), Number(match[2]), Number(match[3])], pre: match[4] !== undefined };
}

/** The refusal for a server older than `minimum`, if it is. */
export function versionRefusal(server: string, version: string, minimum = SAFE_NATS_VERSION): NatsVersionError | undefined {
  return compareVersions(version, minimum) < 0 || compareVersions(version, MULTI_FILTER_NATS_VERSION) < 0 ? new NatsVersionError(server, version) : undefined;
}

/** The refusals for an existing stream whose replicas or storage differ from what is configured. */
export function streamSettingsRefusals(info: StreamInfo, replicas: number): StreamSettingsError[] {
  const { name, num_replicas: found, storage } = info.config;
  const refusals: StreamSettingsError[] = [];
  if (found !== replicas) {
    refusals.push(
      new StreamSettingsError(
        "STREAM_REPLICAS",
        `stream ${name} has ${found} replica(s) but STREAM_REPLICAS is ${replicas}: scale the stream (nats stream edit ${name} --replicas ${replicas}) or set STREAM_REPLICAS=${found}`,
      ),
    );
  }
  if (storage !== "file") {
    refusals.push(
      new StreamSettingsError(
        "stream storage",
        `stream ${name} keeps its messages in ${storage} storage, not on file: recreate it (storage cannot be changed)`,
      ),
    );
  }
  return refusals;
}

/** What a server's monitoring endpoint (`/varz`) says about it. */
export interface MonitoredServer {
  url: string;
  name: string;
  version: string;
  syncAlways: boolean;
  /** Nanoseconds between syncs when not `syncAlways`. */
  syncIntervalNs: number;
}

/**
 * Reads `/varz` of each monitoring URL. A server that cannot be read is a refusal, not a pass: the guard
 * would otherwise be off exactly when the deployment is misconfigured.
 */
export async function readMonitoredServers(urls: readonly string[], timeoutMs = 5_000): Promise<MonitoredServer[] | NatsSyncError> {
  const servers: MonitoredServer[] = [];
  for (const url of urls) {
    const endpoint = `${url.replace(/\/+$/, "")}/varz`;
    try {
      const response = await fetch(endpoint, { signal: AbortSignal.timeout(timeoutMs) });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const varz = (await response.json()) as {
        server_name?: string;
        server_id?: string;
        version?: string;
        jetstream?: { config?: { sync_always?: boolean; sync_interval?: number } };
      };
      servers.push({
        url,
        name: varz.server_name ?? varz.server_id ?? url,
        version: varz.version ?? "unknown",
        syncAlways: varz.jetstream?.config?.sync_always === true,
        syncIntervalNs: varz.jetstream?.config?.sync_interval ?? 0,
      });
    } catch (error) {
      return new NatsSyncError(`cannot read ${endpoint} to verify that the server syncs every write: ${(error as Error).message}`, { cause: error });
    }
  }
  return servers;
}

/**
 * The refusals of the sync guard: a monitored server without `sync_interval: always`, and — in a cluster — a
 * server holding the stream that no monitoring URL covers (a single server is checked only when monitored).
 */
export function syncRefusals(servers: readonly MonitoredServer[], stream: StreamInfo, clustered: boolean): NatsSyncError[] {
  const refusals: NatsSyncError[] = [];
  for (const server of servers) {
    if (server.syncAlways) continue;
    refusals.push(
      new NatsSyncError(
        `nats-server ${server.name} (${server.url}) syncs to disk every ${formatNs(server.syncIntervalNs)}, not on every write: set jetstream { sync_interval: always } on every server`,
      ),
    );
  }
  if (!clustered) return refusals;
  const peers = [stream.cluster?.leader, ...(stream.cluster?.replicas ?? []).map((r) => r.name)].filter((p): p is string => p !== undefined);
  const unverified = peers.filter((peer) => !servers.some((s) => s.name === peer));
  if (unverified.length > 0) {
    refusals.push(
      new NatsSyncError(
        `cannot verify that clustered servers ${unverified.join(", ")} holding stream ${stream.config.name} sync every write: list their monitoring URLs in NATS_MONITOR_URL`,
      ),
    );
  }
  return refusals;
}

function formatNs(ns: number): string {
  if (ns <= 0) return "(unknown interval)";
  const seconds = ns / 1e9;
  return seconds >= 60 ? `${seconds / 60} min` : `${seconds} s`;
}
