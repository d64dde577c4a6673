import { randomFillSync } from "node:crypto";
import { decodeTime, encodeTime, monotonicFactory } from "ulid";
import { z } from "zod";

const pool = new Uint32Array(256);
let next = pool.length;
/**
 * Cryptographic randomness for ULIDs, drawn from a refilled pool: the library's own source asks the CSPRNG
 * for one byte per character, sixteen calls per id, on every hop that mints one.
 */
function pooledRandom(): number {
  if (next >= pool.length) {
    randomFillSync(pool);
    next = 0;
  }
  return pool[next++]! / 0x1_0000_0000;
}

const ulid = monotonicFactory(pooledRandom);

/** A subject-safe token: only characters that can never change NATS routing. */
const SUBJECT_TOKEN = /^[A-Za-z0-9_-]{1,64}$/;

/** True when `token` can be embedded as one NATS subject token without changing routing. */
export function isSubjectSafe(token: string): boolean {
  return SUBJECT_TOKEN.test(token);
}

/** Runtime-generated call id (`call_<ULID>`); the provider's own call id is kept as data only. */
export const CallIdSchema = z.string().regex(/^call_[0-9A-HJKMNP-TV-Z]{26}$/, "expected a call id (call_<ULID>)");
export type CallId = string;

/** Runtime-generated run id (`run_<ULID>`). */
export const RunIdSchema = z.string().regex(/^run_[0-9A-HJKMNP-TV-Z]{26}$/, "expected a run id (run_<ULID>)");
export type RunId = string;

/** Creates a new call id; sortable by creation time. */
export function newCallId(): CallId {
  return `call_${ulid()}`;
}

/** Creates a new run id; sortable by creation time. */
export function newRunId(): RunId {
  return `run_${ulid()}`;
}

/** The lowest call id that can be minted at `ms` (epoch): every call id minted before it sorts below it. */
export function callIdFloor(ms: number): CallId {
  return `call_${encodeTime(Math.max(0, Math.floor(ms)), 10)}${"0".repeat(16)}`;
}

/** When a call or run id was minted (epoch ms, from its ULID), or undefined for anything else. */
export function idTime(id: string): number | undefined {
  const match = /^(?:call|run)_([0-9A-HJKMNP-TV-Z]{26})$/.exec(id);
  if (!match) return undefined;
  try {
    return decodeTime(match[1]!);
  } catch {
    return undefined;
  }
}
