/** A contract that cannot be compiled (bad JSON Schema, duplicate name, bad key template): a programmer or deploy error. */
export class ContractError extends Error {
  readonly code = "INVALID_CONTRACT";
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "ContractError";
  }
}
