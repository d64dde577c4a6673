/** Tuning of {@link Bm25Index}: term saturation `k1`, length normalization `b`, and the title's weight. */
export interface Bm25Parameters {
  k1: number;
  b: number;
  titleWeight: number;
}

/** Textbook BM25 constants; a title term counts three times a body term. */
export const DEFAULT_BM25_PARAMETERS: Bm25Parameters = { k1: 1.2, b: 0.75, titleWeight: 3 };

/** The terms of one document, by field. */
export interface FieldTerms {
  title: readonly string[];
  body: readonly string[];
}

interface IndexedDocument {
  termFrequency: ReadonlyMap<string, number>;
  length: number;
}

/**
 * BM25F over two fields: title and body term frequencies are combined with the title weight before
 * saturation, so a title match ranks higher without letting a repeated title term dominate.
 */
export class Bm25Index {
  readonly #documents: IndexedDocument[];
  readonly #documentFrequency = new Map<string, number>();
  readonly #averageLength: number;
  readonly #parameters: Bm25Parameters;

  constructor(documents: readonly FieldTerms[], parameters: Bm25Parameters = DEFAULT_BM25_PARAMETERS) {
    this.#parameters = parameters;
    this.#documents = documents.map((fields) => {
      const termFrequency = new Map<string, number>();
      for (const term of fields.title) termFrequency.set(term, (termFrequency.get(term) ?? 0) + parameters.titleWeight);
      for (const term of fields.body) termFrequency.set(term, (termFrequency.get(term) ?? 0) + 1);
      for (const term of termFrequency.keys()) this.#documentFrequency.set(term, (this.#documentFrequency.get(term) ?? 0) + 1);
      return { termFrequency, length: fields.title.length * parameters.titleWeight + fields.body.length };
    });
    const total = this.#documents.reduce((sum, d) => sum + d.length, 0);
    this.#averageLength = this.#documents.length === 0 ? 0 : total / this.#documents.length;
  }

  /** Number of indexed documents. */
  get size(): number {
    return this.#documents.length;
  }

  /** Inverse document frequency of `term` (always positive for indexed terms, 0 for unknown ones). */
  idf(term: string): number {
    const df = this.#documentFrequency.get(term) ?? 0;
    if (df === 0) return 0;
    const n = this.#documents.length;
    return Math.log(1 + (n - df + 0.5) / (df + 0.5));
  }

  /** BM25F score of the document at `index` for distinct `terms`; 0 when none of them occurs in it. */
  score(index: number, terms: readonly string[]): number {
    const document = this.#documents[index];
    if (document === undefined || this.#averageLength === 0) return 0;
    const { k1, b } = this.#parameters;
    const norm = k1 * (1 - b + (b * document.length) / this.#averageLength);
    let score = 0;
    for (const term of terms) {
      const tf = document.termFrequency.get(term) ?? 0;
      if (tf === 0) continue;
      score += (this.idf(term) * tf * (k1 + 1)) / (tf + norm);
    }
    return score;
  }
}
