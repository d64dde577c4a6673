import type { JsonValue, ResultEnvelope, RunId } from "@toolgate/contracts";
import { ToolRegistry, type ToolContractInput, type ToolHandler } from "@toolgate/registry";
import { evidenceId, researchTools, type EvidenceRecord, type EvidenceStore, type NewEvidence } from "@toolgate/research-tools";
import { z } from "zod";

/** One recorded proposal: what the model asked for and what the runtime answered then. */
export const RecordedProposalSchema = z
  .object({
    call_id: z.string().max(128).optional(),
    tool: z.string().min(1).max(256),
    arguments_json: z.string().max(1_048_576),
    /** The run's task, for tools scoped to it. */
    task_id: z.string().max(128).optional(),
    /** The terminal result then; absent when the trail had none. */
    result: z.record(z.string(), z.unknown()).optional(),
  })
  .strict();
export type RecordedProposal = z.infer<typeof RecordedProposalSchema>;

/** A replay file: `{ proposals: [...] }`, or the events of a run as audit's API (and `toolgate audit --json`) returns them. */
const ReplayFileSchema = z.union([
  z.object({ proposals: z.array(RecordedProposalSchema).min(1).max(10_000) }).strict(),
  z.object({ events: z.array(z.object({ event: z.record(z.string(), z.unknown()) }).loose()).max(100_000) }).loose(),
]);

/** A replay input that is neither a proposals list nor an audit trail. */
export class ReplayInputError extends Error {
  readonly code = "INVALID_REPLAY_INPUT";
  constructor(message: string) {
    super(message);
    this.name = "ReplayInputError";
  }
}

interface TrailEvent {
  kind?: unknown;
  type?: unknown;
  call_id?: unknown;
  payload?: Record<string, unknown>;
}

/** The proposals of an audit trail (`{ events: [{ event }] }`), each with the terminal result it had. */
export function proposalsFromTrail(events: readonly { event: Record<string, unknown> }[]): RecordedProposal[] {
  const byCall = new Map<string, RecordedProposal>();
  for (const { event } of events as readonly { event: TrailEvent }[]) {
    if (event.kind !== "call" || typeof event.call_id !== "string") continue;
    const payload = event.payload ?? {};
    if (event.type === "proposed") {
      const context = payload.context as { task_id?: unknown } | undefined;
      byCall.set(event.call_id, {
        call_id: event.call_id,
        tool: String(payload.tool_name),
        arguments_json: String(payload.arguments_json),
        ...(typeof context?.task_id === "string" ? { task_id: context.task_id } : {}),
      });
    } else if (["completed", "outcome_unknown", "rejected", "denied"].includes(String(event.type))) {
      const proposal = byCall.get(event.call_id);
      if (proposal && payload.result && typeof payload.result === "object") proposal.result = payload.result as Record<string, unknown>;
    }
  }
  return [...byCall.values()];
}

/** Parses a replay file's JSON; throws {@link ReplayInputError}. */
export function parseReplayInput(value: unknown): RecordedProposal[] {
  const parsed = ReplayFileSchema.safeParse(value);
  if (!parsed.success) throw new ReplayInputError(`not a proposals list nor an audit trail: ${parsed.error.issues[0]?.message ?? "invalid"}`);
  const data = parsed.data;
  const proposals: RecordedProposal[] = "proposals" in data ? (data.proposals as RecordedProposal[]) : proposalsFromTrail(data.events);
  if (proposals.length === 0) throw new ReplayInputError("the input holds no proposed call");
  return proposals;
}

/** What the runtime answers one proposal with, at the structural layer and through a (simulated) downstream. */
export interface ReplayOutcome {
  accepted: boolean;
  /** The error code, when the call ends in one. */
  code: string | undefined;
  /** Top-level keys of a successful result's data, sorted. */
  shape: string[] | undefined;
  /** Pointers of the argument violations, for INVALID_ARGUMENTS. */
  pointers?: string[];
}

export interface ReplayedProposal {
  call_id: string | undefined;
  tool: string;
  before: ReplayOutcome;
  after: ReplayOutcome;
  /** What changed, for people: `accepted → rejected (INVALID_ARGUMENTS at /limit)`, `result shape …`, `error code …`. */
  changes: string[];
}

export interface ReplayReport {
  contracts: Record<string, { version: string; hash: string }>;
  proposals: ReplayedProposal[];
  summary: { proposals: number; changed: number; accepted_to_rejected: number; rejected_to_accepted: number; code_changed: number; shape_changed: number };
}

const STRUCTURAL_CODES = new Set(["UNKNOWN_TOOL", "TOOL_DISABLED", "INVALID_JSON", "INVALID_ARGUMENTS"]);

function outcomeOf(result: Record<string, unknown> | undefined): ReplayOutcome {
  if (!result) return { accepted: false, code: undefined, shape: undefined };
  const envelope = result as Partial<ResultEnvelope> & { error?: { code?: string } };
  if (envelope.ok === true) return { accepted: true, code: undefined, shape: shapeOf(envelope.data) };
  const code = envelope.error?.code;
  return { accepted: code === undefined || !STRUCTURAL_CODES.has(code), code, shape: undefined };
}

function shapeOf(data: JsonValue | undefined): string[] | undefined {
  return data !== null && typeof data === "object" && !Array.isArray(data) ? Object.keys(data).sort() : undefined;
}

/** Evidence kept in memory: the simulated downstream of `save_evidence`, nothing written anywhere. */
class MemoryEvidenceStore implements EvidenceStore {
  readonly #records = new Map<string, EvidenceRecord>();
  save(evidence: NewEvidence): Promise<{ record: EvidenceRecord; created: boolean }> {
    const id = evidenceId(evidence.taskId, evidence.idempotencyKey);
    const existing = this.#records.get(id);
    if (existing) return Promise.resolve({ record: existing, created: false });
    const record: EvidenceRecord = { evidenceId: id, ...evidence, createdAt: new Date(0) };
    this.#records.set(id, record);
    return Promise.resolve({ record, created: true });
  }
  listByTask(taskId: string): Promise<EvidenceRecord[]> {
    return Promise.resolve([...this.#records.values()].filter((r) => r.taskId === taskId));
  }
  ensureIndexes(): Promise<void> {
    return Promise.resolve();
  }
}

/**
 * Replays recorded proposals against other contract versions (seed 003: when a tool changes, replay fixed
 * proposals against simulated downstreams): each proposal through the new contract's structural layer, then
 * — when accepted — through a simulated downstream (the research tools over the shipped corpus with an
 * in-memory store; any other tool answers what it answered then) and the new output schema. Policy decisions
 * (permissions, approvals, quotas) are not replayed. Pure apart from the corpus read; throws ContractError
 * for a contract that does not compile.
 */
export async function replayProposals(proposals: readonly RecordedProposal[], contracts: readonly ToolContractInput[]): Promise<ReplayReport> {
  const registry = ToolRegistry.from(contracts);
  const handlers = new Map<string, ToolHandler>(researchTools({ evidence: new MemoryEvidenceStore() }).map((d) => [d.contract.name, d.handler]));
  const replayed: ReplayedProposal[] = [];
  for (const [i, proposal] of proposals.entries()) {
    const before = outcomeOf(proposal.result);
    const after = await replayOne(registry, handlers, proposal, i);
    replayed.push({ call_id: proposal.call_id, tool: proposal.tool, before, after, changes: changesOf(before, after) });
  }
  const count = (p: (r: ReplayedProposal) => boolean) => replayed.filter(p).length;
  return {
    contracts: Object.fromEntries(registry.list().map((t) => [t.contract.name, { version: t.contract.version, hash: t.hash }])),
    proposals: replayed,
    summary: {
      proposals: replayed.length,
      changed: count((r) => r.changes.length > 0),
      accepted_to_rejected: count((r) => r.before.accepted && !r.after.accepted),
      rejected_to_accepted: count((r) => !r.before.accepted && r.after.accepted && r.before.code !== undefined),
      code_changed: count((r) => r.before.code !== r.after.code),
      shape_changed: count((r) => r.before.shape !== undefined && r.after.shape !== undefined && r.before.shape.join() !== r.after.shape.join()),
    },
  };
}

async function replayOne(
  registry: ToolRegistry,
  handlers: ReadonlyMap<string, ToolHandler>,
  proposal: RecordedProposal,
  index: number,
): Promise<ReplayOutcome> {
  const tool = registry.get(proposal.tool);
  if (!tool) return { accepted: false, code: "UNKNOWN_TOOL", shape: undefined };
  if (!tool.contract.enabled) return { accepted: false, code: "TOOL_DISABLED", shape: undefined };
  const checked = registry.checkArguments(tool, proposal.arguments_json);
  if (!checked.ok) return { accepted: false, code: checked.code, shape: undefined, pointers: checked.violations.map((v) => v.pointer) };
  const handler = handlers.get(tool.contract.name);
  let data: JsonValue;
  if (handler) {
    const runId = "run_00000000000000000000000000" as RunId;
    const callId = `call_${String(index).padStart(26, "0")}`;
    const outcome = await handler(checked.arguments, {
      callId,
      runId,
      principal: { tenant: "replay", subject: "replay", roles: [] },
      context: proposal.task_id ? { task_id: proposal.task_id } : {},
      idempotencyKey: tool.idempotencyKey(
        { run_id: runId, call_id: callId, tenant: "replay", subject: "replay", task_id: proposal.task_id, args_hash: checked.argsHash },
        checked.arguments,
      ),
      signal: new AbortController().signal,
    });
    if (outcome.ok === false) return { accepted: true, code: outcome.code, shape: undefined };
    if (outcome.ok === "accepted") return { accepted: true, code: undefined, shape: ["operation_id", "state"] };
    data = outcome.data;
  } else {
    const recorded = proposal.result as Partial<ResultEnvelope> | undefined;
    if (recorded?.ok !== true) return { accepted: true, code: (recorded as { error?: { code?: string } } | undefined)?.error?.code, shape: undefined };
    data = recorded.data as JsonValue;
  }
  const result = registry.checkResult(tool, data);
  if (!result.ok) return { accepted: true, code: result.code, shape: undefined };
  return { accepted: true, code: undefined, shape: shapeOf(data) };
}

function changesOf(before: ReplayOutcome, after: ReplayOutcome): string[] {
  const changes: string[] = [];
  const at = (o: ReplayOutcome) => (o.pointers?.length ? ` at ${o.pointers.join(", ")}` : "");
  if (before.accepted && !after.accepted) changes.push(`accepted → rejected (${after.code ?? "?"}${at(after)})`);
  else if (!before.accepted && after.accepted && before.code !== undefined) changes.push(`rejected (${before.code}) → accepted`);
  else if (before.code !== after.code) changes.push(`error code ${before.code ?? "none"} → ${after.code ?? "none"}`);
  if (before.shape && after.shape && before.shape.join() !== after.shape.join()) {
    const added = after.shape.filter((k) => !before.shape!.includes(k));
    const removed = before.shape.filter((k) => !after.shape!.includes(k));
    changes.push(`result shape ${[...added.map((k) => `+${k}`), ...removed.map((k) => `-${k}`)].join(" ")}`);
  }
  return changes;
}

/** The replay report as text: one line per proposal that changed, then the summary. */
export function formatReplay(report: ReplayReport): string {
  const lines = report.proposals.filter((p) => p.changes.length > 0).map((p) => `${p.call_id ?? "(no call id)"}  ${p.tool}  ${p.changes.join("; ")}`);
  const s = report.summary;
  lines.push(
    `${s.proposals} proposals replayed: ${s.changed} changed (${s.accepted_to_rejected} accepted → rejected, ${s.rejected_to_accepted} rejected → accepted, ${s.code_changed} with another error code, ${s.shape_changed} with another result shape)`,
  );
  return lines.join("\n");
}
