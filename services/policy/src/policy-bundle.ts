import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { sha256, type Principal } from "@toolgate/contracts";
import { z } from "zod";

/** A policy directory that cannot be used (unreadable, invalid Cedar, invalid entities or quotas): a deploy error. */
export class PolicyLoadError extends Error {
  readonly code = "INVALID_POLICY";
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "PolicyLoadError";
  }
}

const QuotaRuleSchema = z
  .object({
    /** Names the rule in decisions and in the counters' keys. */
    id: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/),
    /** A tool name, or `*` for every tool (each tool still counts separately). */
    tool: z.string().min(1).max(64),
    tenant: z.string().min(1).max(128).default("*"),
    role: z.string().min(1).max(128).optional(),
    subject: z.string().min(1).max(128).optional(),
    /** Calls per principal and tool in one window. */
    limit: z.number().int().min(1).max(1_000_000),
    window_ms: z
      .number()
      .int()
      .min(1_000)
      .max(24 * 3_600_000),
  })
  .strict();
export type QuotaRule = z.infer<typeof QuotaRuleSchema>;

const QuotasFileSchema = z.object({ quotas: z.array(QuotaRuleSchema).max(1_000) }).strict();

/** The quota rules in force: the first rule that matches a principal and a tool applies to it. */
export class QuotaRules {
  readonly rules: readonly QuotaRule[];

  constructor(rules: readonly QuotaRule[]) {
    this.rules = rules;
  }

  /** Parses `quotas.json`; throws {@link PolicyLoadError}. */
  static parse(text: string | undefined): QuotaRules {
    if (text === undefined) return new QuotaRules([]);
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch (error) {
      throw new PolicyLoadError(`quotas.json is not JSON: ${(error as Error).message}`, { cause: error });
    }
    const parsed = QuotasFileSchema.safeParse(json);
    if (!parsed.success) throw new PolicyLoadError(`quotas.json: ${parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`);
    const ids = new Set<string>();
    for (const rule of parsed.data.quotas) {
      if (ids.has(rule.id)) throw new PolicyLoadError(`quotas.json: rule id ${rule.id} is used twice`);
      ids.add(rule.id);
    }
    return new QuotaRules(parsed.data.quotas);
  }

  /** The rule that limits `principal` on `tool`, if any. */
  match(principal: Principal, tool: string): QuotaRule | undefined {
    return this.rules.find(
      (r) =>
        (r.tool === "*" || r.tool === tool) &&
        (r.tenant === "*" || r.tenant === principal.tenant) &&
        (r.role === undefined || principal.roles.includes(r.role)) &&
        (r.subject === undefined || r.subject === principal.subject),
    );
  }
}

/** The files of a policy directory, as text. */
export interface PolicyBundle {
  /** `cedar-<digest>`: changes with any byte of any file; recorded with every decision. */
  version: string;
  schema: string;
  /** Every `*.cedar` file, by name, in name order. */
  policies: { file: string; text: string }[];
  entities: string;
  quotas: string | undefined;
}

const SCHEMA_FILE = "schema.cedarschema";
const ENTITIES_FILE = "entities.json";
const QUOTAS_FILE = "quotas.json";

/**
 * Reads a policy directory: `schema.cedarschema`, every `*.cedar` file, `entities.json` and, optionally,
 * `quotas.json`. Throws {@link PolicyLoadError} when a required file is missing or unreadable.
 */
export function readPolicyDir(dir: string): PolicyBundle {
  let names: string[];
  try {
    names = readdirSync(dir).sort();
  } catch (error) {
    throw new PolicyLoadError(`cannot read the policy directory ${dir}: ${(error as Error).message}`, { cause: error });
  }
  const read = (name: string): string => {
    try {
      return readFileSync(join(dir, name), "utf8");
    } catch (error) {
      throw new PolicyLoadError(`cannot read ${name} in the policy directory: ${(error as Error).message}`, { cause: error });
    }
  };
  const policyFiles = names.filter((n) => n.endsWith(".cedar"));
  if (!names.includes(SCHEMA_FILE)) throw new PolicyLoadError(`the policy directory has no ${SCHEMA_FILE}`);
  if (!names.includes(ENTITIES_FILE)) throw new PolicyLoadError(`the policy directory has no ${ENTITIES_FILE}`);
  if (policyFiles.length === 0) throw new PolicyLoadError("the policy directory has no *.cedar file");
  const bundle = {
    schema: read(SCHEMA_FILE),
    policies: policyFiles.map((file) => ({ file, text: read(file) })),
    entities: read(ENTITIES_FILE),
    quotas: names.includes(QUOTAS_FILE) ? read(QUOTAS_FILE) : undefined,
  };
  const digest = sha256(JSON.stringify([bundle.schema, bundle.policies, bundle.entities, bundle.quotas ?? null]));
  return { version: `cedar-${digest.slice("sha256:".length, "sha256:".length + 12)}`, ...bundle };
}

/** A cheap fingerprint of the directory (names, sizes, modification times): when it changes, read it again. */
export function policyDirFingerprint(dir: string): string {
  try {
    return readdirSync(dir)
      .sort()
      .map((name) => {
        const s = statSync(join(dir, name));
        return `${name}:${s.size}:${s.mtimeMs}`;
      })
      .join("|");
  } catch {
    return "unreadable";
  }
}
