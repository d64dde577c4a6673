/** A command that failed: printed as one line without a stack trace, exit code 1. */
export class CliError extends Error {
  override readonly name = "CliError";
}
