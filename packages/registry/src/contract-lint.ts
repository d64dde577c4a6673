import { contractHash, ToolContractSchema, type ToolContract } from "./contract.js";
import { ContractCompiler, ContractError } from "./registry.js";
import { POISON_RULES, poisonFindings } from "./poison-rules.js";
import { acceptedTypes, isOpenObject, isSchemaObject, NARROWING_APPLICATORS, stringMaxLength, valueBounds, walkSchema } from "./schema-walk.js";
import { writes } from "./tool-semantics.js";

/** The rules of {@link lintContract}. Each finding names one; CI fails on any finding of severity `error`. */
export const LINT_RULES = {
  "invalid-contract": "the contract does not parse against ToolContractSchema or its schemas do not compile",
  "name-not-machine": "the name is not a stable machine identifier: lower snake_case, 3 to 64 characters",
  "name-unstable": "the name carries a version, a date or a temporary marker (v2, 2024, new, tmp…): versions belong in `version`",
  "name-vague": "the name is a catch-all (do_…, run_any_…, execute) rather than one narrow business capability",
  "description-when": "the description does not say when to use the tool",
  "description-when-not": "the description does not say when not to use it (or what to use instead)",
  "object-not-closed": "an object schema lets unknown properties through: set additionalProperties: false",
  "open-object-consequential":
    "additionalProperties: true on a tool that writes, is consequential or runs outside the executor (MCP, HTTP): unknown fields would reach it",
  "string-unbounded": "a string schema has no maxLength (or enum, const, or an anchored pattern of bounded length)",
  "array-unbounded": "an array schema has no maxItems",
  "nesting-unbounded": "the schema admits values of unbounded depth ($ref recursion or an open value)",
  "nesting-over-limit": "the schema admits values nested deeper than limits.max_depth, which the runtime will refuse",
  "reserved-property": "a property is named __proto__, constructor or prototype",
  "write-without-idempotency": "a tool with side effects declares idempotency none: a redelivery could repeat its effect",
  "write-effect-without-write": "write_effect describes writes, but the tool's side effect is none or read",
  "consequential-without-approval": "a consequential tool (high risk, or a medium-risk write/external effect) can run without approval",
  "pointer-unknown": "a sensitive or resource pointer names no property of the input schema",
  "status-check-missing": "a keyed write has no status_check to reconcile an unknown outcome",
  "duplicate-name": "another contract in the same set has this name and version with different content",
  ...POISON_RULES,
} as const;

export type LintRule = keyof typeof LINT_RULES;

/** One problem in one contract. `pointer` is a JSON pointer into the contract document. */
export interface LintFinding {
  rule: LintRule;
  severity: "error" | "warning";
  message: string;
  pointer: string;
}

/** The findings for one contract; `ok` when none is an error. */
export interface LintReport {
  name: string;
  version: string;
  ok: boolean;
  findings: LintFinding[];
}

const RESERVED_PROPERTIES = new Set(["__proto__", "constructor", "prototype"]);
const UNSTABLE_TOKENS = new Set(["new", "old", "tmp", "temp", "test", "copy", "final", "latest", "legacy", "backup", "deprecated", "wip"]);
const VAGUE_TOKENS = new Set(["any", "anything", "arbitrary", "generic", "misc", "stuff"]);
const VAGUE_NAMES = new Set([
  "run",
  "execute",
  "exec",
  "call",
  "invoke",
  "tool",
  "action",
  "function",
  "api",
  "request",
  "eval",
  "shell",
  "command",
  "query",
  "do",
]);

const USE_WHEN = [
  /\buse (it|this|this tool|only|when|to|for|after|before|once|if)\b/i,
  /\bcall (it|this)( tool)? (when|to|for|after|before|once|if)\b/i,
  /\bwhen you (need|want|have)\b/i,
  /(用于|适用于|仅在|当.{1,40}时使用|需要.{1,40}时)/,
];
const USE_WHEN_NOT = [
  /\b(do not|don't|never|not (for|to|when|if|in)|must not|avoid|instead|only (when|for|to|in|if|after|before))\b/i,
  /\buse (it |this tool )?only\b/i,
  /(不要|不应|勿|不能|不适用|而不是|不用于|仅在|仅用于|只在|只用于)/,
];

/**
 * Checks one contract against the seeds' rules for what a model may be offered: a stable machine name, a
 * description that says when to use the tool and when not, closed objects, bounded strings, arrays and
 * nesting, idempotency for writes and approval for consequential tools; and no poisoning anywhere in the
 * definition (instructions to the model, invisible or bidirectional Unicode, references to credentials). Never throws.
 */
export function lintContract(input: unknown, compiler: ContractCompiler = new ContractCompiler()): LintReport {
  const findings: LintFinding[] = [];
  const error = (rule: LintRule, pointer: string, message: string = LINT_RULES[rule]) => findings.push({ rule, severity: "error", message, pointer });
  const warning = (rule: LintRule, pointer: string, message: string = LINT_RULES[rule]) => findings.push({ rule, severity: "warning", message, pointer });

  const raw = isSchemaObject(input) ? input : {};
  const rawName = typeof raw.name === "string" ? raw.name : undefined;
  // The name rule runs first so that a non-machine name is reported as such, not only as a schema error.
  if (rawName !== undefined) lintName(rawName, error, warning);
  // Poisoning is looked for in what was given, valid or not: an import that does not parse is still untrusted text.
  for (const finding of poisonFindings(input)) error(finding.rule, finding.pointer, finding.message);
  const parsed = ToolContractSchema.safeParse(input);
  if (!parsed.success) {
    for (const issue of parsed.error.issues.slice(0, 20)) {
      if (issue.path[0] === "name" && rawName !== undefined) continue;
      error("invalid-contract", `/${issue.path.map(String).join("/")}`, issue.message);
    }
    return report(rawName ?? "(unnamed)", typeof raw.version === "string" ? raw.version : "?", findings);
  }
  const contract = parsed.data;
  try {
    compiler.compile(contract);
  } catch (cause) {
    error("invalid-contract", "/input_schema", cause instanceof ContractError ? cause.message : String(cause));
  }
  lintDescription(contract.description, error);
  lintInputSchema(contract, error, warning);
  lintRuntime(contract, error, warning);
  return report(contract.name, contract.version, findings);
}

/** Lints several contracts; a name and version that appear twice with different content is an error on the later one. */
export function lintContracts(inputs: readonly unknown[]): LintReport[] {
  const compiler = new ContractCompiler();
  const seen = new Map<string, string>();
  return inputs.map((input) => {
    const result = lintContract(input, compiler);
    const parsed = ToolContractSchema.safeParse(input);
    if (parsed.success) {
      const key = `${parsed.data.name}@${parsed.data.version}`;
      const hash = contractHash(parsed.data);
      const first = seen.get(key);
      if (first === undefined) seen.set(key, hash);
      else if (first !== hash) {
        result.findings.push({ rule: "duplicate-name", severity: "error", message: `${key}: ${LINT_RULES["duplicate-name"]}`, pointer: "/name" });
        result.ok = false;
      }
    }
    return result;
  });
}

type Emit = (rule: LintRule, pointer: string, message?: string) => void;

function report(name: string, version: string, findings: LintFinding[]): LintReport {
  return { name, version, ok: findings.every((f) => f.severity !== "error"), findings };
}

function lintName(name: string, error: Emit, warning: Emit): void {
  if (!/^[a-z][a-z0-9]*(_[a-z0-9]+)*$/.test(name) || name.length < 3 || name.length > 64) {
    error("name-not-machine", "/name", `${JSON.stringify(name)}: ${LINT_RULES["name-not-machine"]}`);
    return;
  }
  const tokens = name.split("_");
  const unstable = tokens.find((t) => UNSTABLE_TOKENS.has(t) || /^v\d+$/.test(t) || /^\d+$/.test(t) || /\d{4,}/.test(t));
  if (unstable !== undefined) error("name-unstable", "/name", `${JSON.stringify(name)} contains ${JSON.stringify(unstable)}: ${LINT_RULES["name-unstable"]}`);
  if (VAGUE_NAMES.has(name) || tokens[0] === "do" || tokens.some((t) => VAGUE_TOKENS.has(t))) {
    warning("name-vague", "/name", `${JSON.stringify(name)}: ${LINT_RULES["name-vague"]}`);
  }
}

function lintDescription(description: string, error: Emit): void {
  if (!USE_WHEN.some((re) => re.test(description))) error("description-when", "/description");
  if (!USE_WHEN_NOT.some((re) => re.test(description))) error("description-when-not", "/description");
}

function lintInputSchema(contract: ToolContract, error: Emit, warning: Emit): void {
  const schema = contract.input_schema;
  const consequential = writes(contract) || contract.risk === "high" || contract.transport.kind !== "in_process";
  walkSchema(schema, (sub, pointer, via) => {
    const at = `/input_schema${pointer}`;
    // Extra properties allowed on purpose on a consequential tool: reported once, at the object that allows them.
    if (consequential && via === "additionalProperties" && (sub === true || (isSchemaObject(sub) && Object.keys(sub).length === 0))) return;
    if (sub === true) {
      error("object-not-closed", at, "a `true` schema accepts any value, including open objects");
      return;
    }
    if (sub === false || "const" in sub || Array.isArray(sub.enum)) return;
    // A subschema that only narrows a value described at the same place (an allOf branch without a type) adds no new values.
    if (via !== undefined && NARROWING_APPLICATORS.has(via) && !("type" in sub)) return;
    const types = acceptedTypes(sub);
    if (consequential && types.has("object") && allowsExtraOnPurpose(sub)) error("open-object-consequential", `${at}/additionalProperties`);
    else if (types.has("object") && isOpenObject(sub)) error("object-not-closed", at);
    if (types.has("string") && !Number.isFinite(stringMaxLength(sub))) error("string-unbounded", at);
    if (types.has("array") && typeof sub.maxItems !== "number" && sub.items !== false) error("array-unbounded", at);
    if (isSchemaObject(sub.properties)) {
      for (const key of Object.keys(sub.properties)) if (RESERVED_PROPERTIES.has(key)) error("reserved-property", `${at}/properties/${key}`);
    }
  });
  if (!acceptedTypes(schema).has("object")) error("invalid-contract", "/input_schema", "the input schema must accept a JSON object");
  const depth = schemaDepth(schema);
  if (!Number.isFinite(depth)) error("nesting-unbounded", "/input_schema");
  else if (depth > contract.limits.max_depth) {
    warning("nesting-over-limit", "/limits/max_depth", `the schema admits depth ${depth}; limits.max_depth is ${contract.limits.max_depth}`);
  }
  for (const [field, pointers] of [
    ["sensitive", contract.sensitive.map((p) => ({ pointer: p }))],
    ["resources", contract.resources],
  ] as const) {
    pointers.forEach(({ pointer }, i) => {
      if (!pointsIntoSchema(schema, pointer)) error("pointer-unknown", `/${field}/${i}`, `${pointer} names no property of the input schema`);
    });
  }
}

function lintRuntime(contract: ToolContract, error: Emit, warning: Emit): void {
  const writing = writes(contract);
  if (writing && contract.idempotency.kind === "none") error("write-without-idempotency", "/idempotency");
  if (!writing && contract.write_effect !== undefined) error("write-effect-without-write", "/write_effect");
  if (contract.risk === "high" && contract.approval !== "always") {
    error("consequential-without-approval", "/approval", `a high-risk tool needs approval "always" (it has "${contract.approval}")`);
  } else if (writing && contract.risk === "medium" && contract.approval === "never") {
    error("consequential-without-approval", "/approval", `a medium-risk ${contract.side_effect} tool needs approval "always" or "when_tainted"`);
  }
  if (writing && contract.idempotency.kind === "keyed" && contract.status_check === undefined) warning("status-check-missing", "/status_check");
}

/** `additionalProperties: true` (or `{}`, which accepts anything too) written in the schema: extra fields allowed on purpose. */
function allowsExtraOnPurpose(schema: Record<string, unknown>): boolean {
  const extra = schema.additionalProperties;
  return extra === true || (isSchemaObject(extra) && Object.keys(extra).length === 0);
}

/** Depth of the deepest value the schema admits; Infinity for recursion or an open container. */
function schemaDepth(schema: unknown): number {
  return valueBounds(schema).depth;
}

/** Whether an RFC 6901 pointer into the arguments names a property the schema declares. */
function pointsIntoSchema(schema: unknown, pointer: string): boolean {
  if (pointer === "") return true;
  let current: unknown = schema;
  for (const raw of pointer.slice(1).split("/")) {
    const token = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    if (!isSchemaObject(current)) return false;
    const properties = current.properties;
    if (isSchemaObject(properties) && token in properties) current = properties[token];
    else if (/^\d+$/.test(token) && current.items !== undefined) current = current.items;
    else return false;
  }
  return true;
}
