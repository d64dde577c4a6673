/** A failure that says the message's own content can never be processed: retrying it cannot help. */
export interface Unprocessable {
  reason: string;
}

/**
 * MongoDB server codes for a value the server refuses whatever its state: BadValue, FailedToParse, TypeMismatch,
 * DollarPrefixedFieldName, EmptyFieldName, DottedFieldName, DocumentValidationFailure, BSONObjectTooLarge.
 */
const BAD_VALUE_CODES = new Set([2, 9, 14, 52, 56, 57, 121, 10334]);

/**
 * FerretDB on PostgreSQL answers every backend failure with code 1 (InternalError) and the backend's SQLSTATE in
 * the message; class 22 is "data exception" (22P05: a string holding U+0000), the value's fault, never the
 * server's. The SQLSTATE is the code, carried in the only field FerretDB gives it.
 */
const POSTGRES_DATA_EXCEPTION = /\(SQLSTATE 22[0-9A-Z]{3}\)/;

/**
 * Whether `error` says the data being processed is at fault (the driver could not encode it, the database
 * refused the value), walking its `cause` chain; undefined for any other failure, outages included. A handler
 * failing so fails the same way on every delivery. Never throws.
 */
export function unprocessableValue(error: unknown): Unprocessable | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 8 && current !== null && typeof current === "object"; depth++) {
    const e = current as { name?: unknown; code?: unknown; message?: unknown; writeErrors?: unknown; cause?: unknown };
    const name = typeof e.name === "string" ? e.name : "";
    if (name === "BSONError") return { reason: "the driver cannot encode the document" };
    if (name.startsWith("Mongo")) {
      if (typeof e.code === "number" && BAD_VALUE_CODES.has(e.code)) return { reason: `the database refused the value (code ${e.code})` };
      if (e.code === 1 && typeof e.message === "string" && POSTGRES_DATA_EXCEPTION.test(e.message)) {
        return { reason: "the database refused the value (a PostgreSQL data exception)" };
      }
      const codes = writeErrorCodes(e.writeErrors);
      if (codes.length > 0 && codes.every((c) => BAD_VALUE_CODES.has(c))) return { reason: `the database refused the document (code ${codes[0]})` };
    }
    current = e.cause;
  }
  return undefined;
}

function writeErrorCodes(list: unknown): number[] {
  const items: unknown[] = Array.isArray(list) ? list : list === undefined ? [] : [list];
  return items.map((w) => (typeof w === "object" && w !== null ? (w as { code?: unknown }).code : undefined)).filter((c): c is number => typeof c === "number");
}
