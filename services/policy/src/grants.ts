import { sha256, type Principal } from "@toolgate/contracts";
import { z } from "zod";

const GrantSchema = z
  .object({
    /** Tenant the grant applies to; `*` for every tenant. */
    tenant: z.string().min(1).default("*"),
    subject: z.string().min(1).optional(),
    role: z.string().min(1).optional(),
    /** Tool names, or `*` for every registered tool. */
    tools: z.array(z.string().min(1)).min(1),
  })
  .refine((g) => g.subject !== undefined || g.role !== undefined, { message: "a grant names a subject or a role" });

const GrantsFileSchema = z.object({ grants: z.array(GrantSchema) });

/** Why a grant check came out as it did, recorded with the decision. */
export interface GrantCheck {
  allowed: boolean;
  reason: string;
}

/**
 * The per-principal allow-list: deny by default; a principal may use a tool when a grant for its tenant
 * names its subject or one of its roles. Identity comes only from the authenticated principal.
 */
export class Grants {
  readonly version: string;
  readonly #grants: z.infer<typeof GrantSchema>[];

  private constructor(grants: z.infer<typeof GrantSchema>[], version: string) {
    this.#grants = grants;
    this.version = version;
  }

  /** Parses a grants document; throws a descriptive Error on invalid input (a deploy error). */
  static parse(text: string): Grants {
    const parsed = GrantsFileSchema.safeParse(JSON.parse(text));
    if (!parsed.success) throw new Error(`invalid grants: ${parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`);
    return new Grants(parsed.data.grants, `grants-${sha256(text).slice(7, 19)}`);
  }

  check(principal: Principal, tool: string): GrantCheck {
    for (const [i, g] of this.#grants.entries()) {
      if (g.tenant !== "*" && g.tenant !== principal.tenant) continue;
      const who = g.subject === principal.subject || (g.role !== undefined && principal.roles.includes(g.role));
      if (!who) continue;
      if (g.tools.includes("*") || g.tools.includes(tool)) return { allowed: true, reason: `grant #${i} allows ${tool}` };
    }
    return { allowed: false, reason: `no grant allows ${principal.tenant}/${principal.subject} to use ${tool}` };
  }
}
