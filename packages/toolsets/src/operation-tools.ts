import { defineTool, type ToolContext, type ToolContractInput, type ToolDefinition, type ToolOutcome } from "@toolgate/registry";

/**
 * What the standard operation tools need from the executor that runs them: the operations it tracks. Both
 * answer OBJECT_NOT_FOUND for an operation the calling principal does not own (existence is not revealed).
 */
export interface OperationControl {
  /** The operation's kind, tool, state and, once finished, its result. */
  status(operationId: string, ctx: ToolContext): Promise<ToolOutcome>;
  /** Asks the operation's tool to cancel it; STATE_CONFLICT once it has finished otherwise. */
  cancel(operationId: string, ctx: ToolContext): Promise<ToolOutcome>;
}

/** Runtime operation ids (`op_<ULID of the call>_<attempt>`): the tool's own operation ids are never shown. */
const operationIdSchema = { type: "string", pattern: "^op_[0-9A-HJKMNP-TV-Z]{26}_[0-9]{1,5}$" } as const;
const states = ["accepted", "running", "succeeded", "failed", "cancelled"] as const;

export const getOperationContract: ToolContractInput = {
  name: "get_operation",
  version: "1.0.0",
  description:
    "Reports the state of an operation a previous call started (accepted, running, succeeded, failed, cancelled) and, once it has finished, its result. Use it to follow a long-running tool or to learn how an unknown outcome was reconciled; do not use it to start anything.",
  owner: "toolgate",
  input_schema: { type: "object", properties: { operation_id: operationIdSchema }, required: ["operation_id"], additionalProperties: false },
  output_schema: {
    type: "object",
    properties: {
      operation_id: { type: "string" },
      kind: { enum: ["job", "reconciliation"] },
      tool: { type: "string" },
      state: { enum: states },
      result: { type: "object" },
      updated_at: { type: "string" },
    },
    required: ["operation_id", "kind", "tool", "state", "updated_at"],
    additionalProperties: false,
  },
  side_effect: "read",
  risk: "low",
  timeout_ms: 5_000,
  idempotency: { kind: "natural" },
};

export const cancelOperationContract: ToolContractInput = {
  name: "cancel_operation",
  version: "1.0.0",
  description:
    "Cancels a long-running operation that has not finished yet. Use it when the user no longer wants the result; do not use it on an operation that already finished (that fails with STATE_CONFLICT).",
  owner: "toolgate",
  input_schema: { type: "object", properties: { operation_id: operationIdSchema }, required: ["operation_id"], additionalProperties: false },
  output_schema: {
    type: "object",
    properties: { operation_id: { type: "string" }, state: { enum: states } },
    required: ["operation_id", "state"],
    additionalProperties: false,
  },
  side_effect: "write",
  risk: "low",
  timeout_ms: 10_000,
  idempotency: { kind: "keyed" },
};

/** Contracts of the `operations` tool set. */
export const operationContracts: ToolContractInput[] = [getOperationContract, cancelOperationContract];

/** The standard operation tools, answered by the executor's own operation tracking. */
export function operationTools(control: OperationControl): ToolDefinition[] {
  const id = (args: Record<string, unknown>): string => (typeof args.operation_id === "string" ? args.operation_id : "");
  return [
    defineTool(getOperationContract, (args, ctx) => control.status(id(args), ctx)),
    defineTool(cancelOperationContract, (args, ctx) => control.cancel(id(args), ctx)),
  ];
}
