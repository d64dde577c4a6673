import { randomBytes } from "node:crypto";

/** A random lowercase name for per-test isolation (databases, subject prefixes, durables). */
export function uniqueName(prefix: string): string {
  return `${prefix}${randomBytes(5).toString("hex")}`;
}
