import type { ToolRef } from "@toolgate/contracts";
import type { ContractCatalog, QuarantineReason } from "./contract-catalog.js";
import { lintContract } from "./contract-lint.js";
import { ToolContractSchema, type ToolContractInput } from "./contract.js";
import { definitionHashOf } from "./definition-hash.js";
import { POISON_RULES } from "./poison-rules.js";

/** The part of the catalog admission uses. */
export type AdmissionCatalog = Pick<ContractCatalog, "publish" | "versionsOf" | "isQuarantined" | "refresh">;

/** What became of one untrusted definition. */
export type Admission =
  | {
      name: string;
      /** `offered`: clean and new, a model may be offered it; `quarantined`: held back until its definition hash is approved. */
      status: "offered" | "quarantined";
      ref: ToolRef;
      definition_hash: string;
      /** False when exactly this definition was already in the catalog (nothing was stored). */
      created: boolean;
      reasons: QuarantineReason[];
    }
  | { name: string; status: "invalid"; message: string; reasons: QuarantineReason[] };

const POISON = new Set<string>(Object.keys(POISON_RULES));

/**
 * Admits definitions from outside (an MCP server's tools, a provider's tool list, as draft contracts) into the
 * catalog as untrusted input. Each is linted for poisoning; a flagged one is stored quarantined with its findings.
 * A tool already in the catalog whose definition changed (a rug pull) gets the next minor version and is
 * quarantined too, flagged or not: a changed definition is not trusted until someone approves it. Exactly a
 * definition already stored is left as it is. Throws `CatalogError` when the catalog cannot be written.
 */
export async function admitDefinitions(catalog: AdmissionCatalog, drafts: readonly ToolContractInput[], source?: string): Promise<Admission[]> {
  await catalog.refresh();
  const admissions: Admission[] = [];
  for (const draft of drafts) admissions.push(await admitOne(catalog, draft, source));
  return admissions;
}

async function admitOne(catalog: AdmissionCatalog, draft: ToolContractInput, source: string | undefined): Promise<Admission> {
  const name = typeof draft.name === "string" ? draft.name : "(unnamed)";
  const reasons: QuarantineReason[] = lintContract(draft)
    .findings.filter((f) => POISON.has(f.rule))
    .map(({ rule, pointer, message }) => ({ rule, pointer, message }));
  const parsed = ToolContractSchema.safeParse(draft);
  if (!parsed.success) return { name, status: "invalid", message: parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; "), reasons };

  const earlier = catalog.versionsOf(parsed.data.name);
  // The same definition under an existing version's number is what is stored already.
  const same = earlier.find((tool) => definitionHashOf(ToolContractSchema.parse({ ...draft, version: tool.ref.version })) === definitionHashOf(tool.contract));
  const latest = earlier.at(-1);
  if (same) {
    // A higher version held back withholds the tool, whichever older definition the server presents again.
    const withheldBy = latest !== undefined && latest !== same && catalog.isQuarantined(latest.hash) ? latest : undefined;
    if (withheldBy) {
      reasons.push({
        rule: "definition-changed",
        pointer: "",
        message: `${withheldBy.ref.name}@${withheldBy.ref.version} (${definitionHashOf(withheldBy.contract)}) is quarantined: the tool is withheld until a definition is approved`,
      });
    }
    return {
      name,
      status: catalog.isQuarantined(same.hash) || withheldBy ? "quarantined" : "offered",
      ref: same.ref,
      definition_hash: definitionHashOf(same.contract),
      created: false,
      reasons,
    };
  }
  const version = latest === undefined ? parsed.data.version : nextMinor(latest.ref.version);
  if (latest !== undefined) {
    reasons.push({
      rule: "definition-changed",
      pointer: "",
      message: `the definition differs from ${latest.ref.name}@${latest.ref.version} (${definitionHashOf(latest.contract)}): a changed definition needs approval`,
    });
  }
  const contract = { ...draft, version };
  const outcome = await catalog.publish(contract, reasons.length > 0 ? { reasons, ...(source !== undefined ? { source } : {}) } : undefined);
  if (!outcome.ok) return { name, status: "invalid", message: `${outcome.code}: ${outcome.message}`, reasons };
  return {
    name,
    status: reasons.length > 0 ? "quarantined" : "offered",
    ref: outcome.ref,
    definition_hash: definitionHashOf(ToolContractSchema.parse(contract)),
    created: outcome.created,
    reasons,
  };
}

function nextMinor(version: string): string {
  const [major = "0", minor = "0"] = version.split(".");
  return `${major}.${Number(minor) + 1}.0`;
}
