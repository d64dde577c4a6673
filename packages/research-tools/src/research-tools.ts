import { defineTool, type ToolContractInput, type ToolDefinition } from "@toolgate/registry";
import { loadCorpus } from "./corpus.js";
import type { EvidenceStore } from "./evidence-store.js";
import { fetchDocumentContract, fetchDocumentHandler } from "./fetch-document.js";
import { saveEvidenceContract, saveEvidenceHandler } from "./save-evidence.js";
import { searchSourcesContract, searchSourcesHandler, type CompiledSlowSearch } from "./search-sources.js";
import { servingHandler, type ServedResult } from "./served-results.js";
import { DEFAULT_FETCH_MAX_CHARS } from "./text-normalization.js";

/** The contracts of the C04 research tools, usable without a store (the policy service needs only these). */
export const researchContracts: ToolContractInput[] = [searchSourcesContract, fetchDocumentContract, saveEvidenceContract];

/** Makes searches whose query matches `pattern` (a regular expression source, case-insensitive) wait `delayMs`. */
export interface SlowSearchFault {
  pattern: string;
  delayMs: number;
}

/** Faults for demos and tests; none is active unless configured. */
export interface ResearchFaults {
  slowSearch?: SlowSearchFault | undefined;
  /** Faulty or malicious answers of the read tools, for evaluation (see `ServedResultSchema`). */
  served?: readonly ServedResult[] | undefined;
}

/** Dependencies and settings of {@link researchTools}. */
export interface ResearchToolsOptions {
  evidence: EvidenceStore;
  /** Directory of the corpus; defaults to the one shipped with this package. */
  corpusDir?: string | URL | undefined;
  /** Characters `fetch_document` returns at most, 1 to 20,000 (the contract's bound); default 20,000. */
  fetchMaxChars?: number | undefined;
  faults?: ResearchFaults | undefined;
}

/**
 * Binds the three research contracts to handlers over the corpus (loaded now, synchronously) and the given
 * evidence store. Throws CorpusError for a bad corpus and RangeError/SyntaxError for bad options.
 */
export function researchTools(options: ResearchToolsOptions): ToolDefinition[] {
  const maxChars = options.fetchMaxChars ?? DEFAULT_FETCH_MAX_CHARS;
  if (!Number.isInteger(maxChars) || maxChars < 1 || maxChars > DEFAULT_FETCH_MAX_CHARS) {
    throw new RangeError(`fetchMaxChars must be an integer from 1 to ${DEFAULT_FETCH_MAX_CHARS}`);
  }
  const corpus = loadCorpus(options.corpusDir);
  const served = options.faults?.served ?? [];
  return [
    defineTool(searchSourcesContract, servingHandler("search_sources", served, searchSourcesHandler(corpus, compileSlowSearch(options.faults?.slowSearch)))),
    defineTool(fetchDocumentContract, servingHandler("fetch_document", served, fetchDocumentHandler(corpus, maxChars))),
    defineTool(saveEvidenceContract, saveEvidenceHandler(options.evidence)),
  ];
}

function compileSlowSearch(fault: SlowSearchFault | undefined): CompiledSlowSearch | undefined {
  if (fault === undefined) return undefined;
  if (!Number.isFinite(fault.delayMs) || fault.delayMs < 0) throw new RangeError("faults.slowSearch.delayMs must be a non-negative number");
  // No "g" flag: a global RegExp keeps lastIndex between test() calls and would match every other query.
  return { pattern: new RegExp(fault.pattern, "i"), delayMs: fault.delayMs };
}
