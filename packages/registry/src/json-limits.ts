/** Nesting depth of a JSON text, by one linear scan (contracts owns it: events are measured the same way). */
export { jsonDepth } from "@toolgate/contracts";

/** UTF-8 byte length of a string without allocating a buffer. */
export function utf8Length(text: string): number {
  return Buffer.byteLength(text, "utf8");
}
