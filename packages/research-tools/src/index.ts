export { researchContracts, researchTools, type ResearchToolsOptions, type ResearchFaults, type SlowSearchFault } from "./research-tools.js";
export { searchSourcesContract, MAX_SEARCH_RESULTS } from "./search-sources.js";
export { fetchDocumentContract } from "./fetch-document.js";
export { saveEvidenceContract } from "./save-evidence.js";
export {
  Corpus,
  CorpusError,
  loadCorpus,
  DEFAULT_CORPUS_DIR,
  SOURCE_TYPES,
  type CorpusEntry,
  type CorpusDocument,
  type SearchOptions,
  type SearchHit,
  type SourceType,
  type SourceFilter,
} from "./corpus.js";
export { normalizeText, truncateText, DEFAULT_FETCH_MAX_CHARS } from "./text-normalization.js";
export { evidenceId, EvidenceStoreError, type EvidenceStore, type EvidenceRecord, type NewEvidence, type SaveEvidenceResult } from "./evidence-store.js";
export { MongoEvidenceStore, type MongoEvidenceStoreOptions } from "./mongo-evidence-store.js";
export { abortableDelay } from "./abortable.js";
export { ServedResultSchema, servedResultMatches, servingHandler, type ServedResult } from "./served-results.js";
