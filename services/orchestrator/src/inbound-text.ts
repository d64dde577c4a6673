import { describeUnsafeText, findUnsafeText, printablePointer, unsafeText, type UnsafeText } from "@toolgate/contracts";

/** A string of a request that the API refuses (`INVALID_CHARACTERS`): where it is and why, printable. */
export interface UnsafeInput {
  /** RFC 6901 pointer into the request body, with unsafe characters escaped. */
  pointer: string;
  message: string;
}

/** The API error code of a request refused for its characters. */
export const INVALID_CHARACTERS = "INVALID_CHARACTERS";

/** Tells a person what a refused string holds and that ids, names and keys take no control characters. */
function refusal(pointer: string, what: string, found: UnsafeText): UnsafeInput {
  const printable = printablePointer(pointer);
  return { pointer: printable, message: `${describeUnsafeText(`${what} at ${printable}`, found)}; ${RULE}` };
}

const RULE = "ids, names and argument keys take no control characters, and no string a NUL or an unpaired surrogate";

// Argument text can hold an unsafe key only through an escape or a raw DEL/C1 character (a raw C0 one is invalid
// JSON, which policy reports as INVALID_JSON): other texts are not parsed here.
const MAY_HOLD_UNSAFE_KEY = /[\\\u007f-\u009f]/;

/**
 * The first string of a host's calls that cannot be recorded or proposed as it is: a call id or tool name with a
 * NUL, another control character or an unpaired surrogate; a raw NUL or unpaired surrogate in the argument text;
 * an argument key (at any depth) with any of them. Argument values are the contract's to judge. Never throws.
 */
export function unsafeCalls(calls: readonly { id: string; name: string; arguments: string }[], base = "/calls"): UnsafeInput | undefined {
  for (const [i, call] of calls.entries()) {
    const at = `${base}/${i}`;
    const id = unsafeText(call.id, "identifier");
    if (id) return refusal(`${at}/id`, "the call id", id);
    const name = unsafeToolName(call.name, `${at}/name`);
    if (name) return name;
    const key = unsafeArguments(call.arguments, `${at}/arguments`);
    if (key) return key;
  }
  return undefined;
}

/** A raw NUL or unpaired surrogate in argument text, or an unsafe key in the object it holds (`pointer` is the arguments'). */
export function unsafeArguments(text: string, pointer: string): UnsafeInput | undefined {
  const raw = unsafeText(text, "text");
  if (raw) return refusal(pointer, "the arguments text", raw);
  if (!MAY_HOLD_UNSAFE_KEY.test(text)) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    // Not JSON: policy answers the call with INVALID_JSON.
    return undefined;
  }
  return unsafeKeys(value, pointer);
}

/** A tool name with a NUL, another control character or an unpaired surrogate (`pointer` is the name's). */
export function unsafeToolName(name: string, pointer: string): UnsafeInput | undefined {
  const found = unsafeText(name, "identifier");
  return found && refusal(pointer, "the tool name", found);
}

/** The first unsafe key of an argument object (`pointer` is the object's). */
export function unsafeKeys(value: unknown, pointer: string): UnsafeInput | undefined {
  const found = findUnsafeText(value, "none", pointer);
  return found && refusal(found.pointer, "the argument key", found);
}

/** A model name with a control character, or run input with a NUL or an unpaired surrogate. */
export function unsafeRunRequest(request: { model: string; input: string }): UnsafeInput | undefined {
  const model = unsafeText(request.model, "identifier");
  if (model) return refusal("/model", "the model name", model);
  const input = unsafeText(request.input, "text");
  return input && refusal("/input", "the input", input);
}
