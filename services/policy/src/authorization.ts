import type { JsonValue, Principal, RunContext } from "@toolgate/contracts";
import type { CompiledTool } from "@toolgate/registry";
import type { CedarAnswer, CedarContext, CedarEntity, CedarPolicies, CedarUid } from "./cedar-policies.js";

/** Everything policy knows about a proposed call, all of it trusted except the (validated) arguments. */
export interface CallFacts {
  principal: Principal;
  tool: CompiledTool;
  arguments: Record<string, JsonValue>;
  /** The run's trusted context (its task), set by the authenticated caller. */
  context: RunContext;
  /** The run's Rule-of-Two state, computed by the orchestrator from its own records. */
  taint: { tainted: boolean; sources: string[] };
  now: Date;
}

/** Policy's answer for one call, with the reasons every decision records. */
export type Authorization =
  | { kind: "allow"; reasons: string[] }
  /** Allowed once a human approves this exact plan. */
  | { kind: "approval"; reasons: string[] }
  | { kind: "deny"; level: "tool"; reasons: string[] }
  /** Denied on the object the arguments point at; says nothing about whether that object exists. */
  | { kind: "deny"; level: "resource"; reasons: string[]; type: string; pointer: string };

/** The Cedar principal of an authenticated caller. */
export function userUid(principal: Pick<Principal, "tenant" | "subject">): CedarUid {
  return { type: "User", id: `${principal.tenant}/${principal.subject}` };
}

/** The Cedar entity type of a contract's resource type: `task` → `Task`, `ticket_item` → `TicketItem`. */
export function entityType(resourceType: string): string {
  return resourceType
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((part) => part[0]!.toUpperCase() + part.slice(1))
    .join("");
}

const ref = (uid: CedarUid) => ({ __entity: uid });

/**
 * The principal's entity: its tenant and subject, and its roles as parents — all from authentication. A user
 * listed in entities.json adds the parents listed there (groups managed with the policies), never attributes.
 */
function userEntity(principal: Principal, policies: CedarPolicies): CedarEntity {
  const uid = userUid(principal);
  const listed = policies.entity(uid);
  const parents = new Map<string, CedarUid>(principal.roles.map((role) => [`Role:${role}`, { type: "Role", id: role }]));
  for (const p of (listed?.parents ?? []) as ({ __entity?: CedarUid } & Partial<CedarUid>)[]) {
    const parent = p.__entity ?? { type: p.type!, id: p.id! };
    parents.set(`${parent.type}:${parent.id}`, parent);
  }
  return { uid, attrs: { tenant: principal.tenant, subject: principal.subject }, parents: [...parents.values()] };
}

/** The ids of a user entity's Role parents. */
function parentRoles(user: CedarEntity): string[] {
  return (user.parents as CedarUid[]).filter((p) => p.type === "Role").map((p) => p.id);
}

const toolEntities = new WeakMap<CompiledTool, CedarEntity>();

function toolEntity(tool: CompiledTool): CedarEntity {
  let entity = toolEntities.get(tool);
  if (!entity) {
    const c = tool.contract;
    entity = {
      uid: { type: "Tool", id: c.name },
      attrs: { version: c.version, risk: c.risk, side_effect: c.side_effect, approval: c.approval, untrusted_output: c.untrusted_output },
      parents: [],
    };
    toolEntities.set(tool, entity);
  }
  return entity;
}

function timeOf(now: Date): { now: number; hour_utc: number; weekday_utc: number } {
  return { now: Math.floor(now.getTime() / 1000), hour_utc: now.getUTCHours(), weekday_utc: now.getUTCDay() };
}

function describe(subject: string, answer: CedarAnswer): string {
  if (answer.errors.length > 0) return `${subject}: denied because policy evaluation failed (${answer.errors.slice(0, 3).join("; ")})`.slice(0, 512);
  if (answer.policies.length > 0) return `${subject}: forbidden by ${answer.policies.join(", ")}`.slice(0, 512);
  return `${subject}: no policy permits it (deny by default)`;
}

/**
 * Authorizes a call at tool level (action `call` on the Tool) and at the level of every resource its contract
 * points at (`read` or `write` on the resource), with risk, taint and time in the context. A denial that a
 * human approval would lift (Cedar permits the same request with `context.approved`) becomes `approval`, as
 * does any call of a contract whose approval rule is `always`. Pure: no I/O.
 */
export function authorizeCall(policies: CedarPolicies, facts: CallFacts): Authorization {
  const { tool, principal } = facts;
  const contract = tool.contract;
  const principalUid = userUid(principal);
  const toolEnt = toolEntity(tool);
  const user = userEntity(principal, policies);
  const entities: CedarEntity[] = [user, toolEnt, ...policies.rolesOf(parentRoles(user))];
  const runTask: CedarUid | undefined = facts.context.task_id === undefined ? undefined : { type: "Task", id: facts.context.task_id };
  const listedRunTask = runTask ? policies.entity(runTask) : undefined;
  if (listedRunTask) entities.push(listedRunTask);
  const context: CedarContext = {
    tool: ref({ type: "Tool", id: contract.name }),
    risk: contract.risk,
    side_effect: contract.side_effect,
    tainted: facts.taint.tainted,
    taint_sources: facts.taint.sources,
    approved: false,
    ...timeOf(facts.now),
    ...(runTask ? { run_task: ref(runTask) } : {}),
  };
  const reasons: string[] = [];
  let needsApproval = false;

  const toolUid = { type: "Tool", id: contract.name };
  const ask = (action: "call" | "read" | "write", resource: CedarUid, resourceEntities: CedarEntity[], approved: boolean) =>
    policies.isAuthorized({ principal: principalUid, action, resource, context: approved ? { ...context, approved } : context, entities: resourceEntities });

  /**
   * Allowed; allowed with a human's approval (the forbids that only an approval lifts are the reasons); or denied,
   * described by what still stands with an approval (so the reasons name what no approval can change).
   */
  const judge = (action: "call" | "read" | "write", resource: CedarUid, resourceEntities: CedarEntity[]) => {
    const plain = ask(action, resource, resourceEntities, false);
    if (plain.allowed) return { verdict: "allow" as const, answer: plain };
    if (plain.errors.length > 0) return { verdict: "deny" as const, answer: plain };
    const approved = ask(action, resource, resourceEntities, true);
    return approved.allowed ? { verdict: "approval" as const, answer: plain } : { verdict: "deny" as const, answer: approved };
  };

  const subject = `call ${contract.name}`;
  const toolJudgement = judge("call", toolUid, entities);
  if (toolJudgement.verdict === "deny") return { kind: "deny", level: "tool", reasons: [describe(subject, toolJudgement.answer)] };
  if (toolJudgement.verdict === "approval") needsApproval = true;
  reasons.push(`${subject}: ${toolJudgement.verdict === "allow" ? "permitted" : "approval required"} by ${toolJudgement.answer.policies.join(", ")}`);
  if (contract.approval === "always" && !needsApproval) {
    needsApproval = true;
    reasons.push(`${subject}: its contract always requires approval`);
  }

  const action = tool.writes ? "write" : "read";
  for (const { type: resourceType, pointer, id } of tool.resources(facts.arguments)) {
    const type = entityType(resourceType);
    const what = `${action} ${resourceType} at ${pointer}`;
    // No reason may depend on whether the object exists: the listed entity only feeds Cedar.
    if (id === null) return { kind: "deny", level: "resource", type: resourceType, pointer, reasons: [`${what}: the arguments name none`] };
    const uid = { type, id };
    const listed = policies.entity(uid);
    const withResource = listed && listed !== listedRunTask ? [...entities, listed] : entities;
    const judgement = judge(action, uid, withResource);
    if (judgement.verdict === "deny") return { kind: "deny", level: "resource", type: resourceType, pointer, reasons: [describe(what, judgement.answer)] };
    if (judgement.verdict === "approval") needsApproval = true;
    reasons.push(`${what}: ${judgement.verdict === "allow" ? "permitted" : "approval required"} by ${judgement.answer.policies.join(", ")}`);
  }
  return needsApproval ? { kind: "approval", reasons } : { kind: "allow", reasons };
}

/** Whether `approver` may approve `requester`'s call of `tool` (Cedar action `approve`), with the reasons. */
export function authorizeApproval(
  policies: CedarPolicies,
  facts: { approver: Principal; requester: Principal; tool: CompiledTool; tainted: boolean; now: Date },
): { allowed: boolean; reasons: string[] } {
  const requesterUid = userUid(facts.requester);
  const approver = userEntity(facts.approver, policies);
  const entities = [approver, toolEntity(facts.tool), ...policies.rolesOf(parentRoles(approver))];
  if (requesterUid.id !== userUid(facts.approver).id) entities.push(userEntity(facts.requester, policies));
  const answer = policies.isAuthorized({
    principal: userUid(facts.approver),
    action: "approve",
    resource: { type: "Tool", id: facts.tool.contract.name },
    context: { requester: ref(requesterUid), tainted: facts.tainted, ...timeOf(facts.now) },
    entities,
  });
  const subject = `approve ${facts.tool.contract.name} for ${requesterUid.id}`;
  return { allowed: answer.allowed, reasons: [answer.allowed ? `${subject}: permitted by ${answer.policies.join(", ")}` : describe(subject, answer)] };
}
