import { describe, expect, it } from "vitest";
import { Corpus, CorpusError, loadCorpus, type CorpusEntry } from "./index.js";

const C04_QUERY = "OpenAI Agents SDK state management official documentation";
const corpus = loadCorpus();

describe("the shipped corpus", () => {
  it("holds 12-16 documents of every source type, one with markup and one longer than 25,000 characters", () => {
    const documents = corpus.documents;
    expect(documents.length).toBeGreaterThanOrEqual(12);
    expect(documents.length).toBeLessThanOrEqual(16);
    expect(new Set(documents.map((d) => d.sourceType))).toEqual(new Set(["official", "community", "blog"]));
    expect(documents.every((d) => d.url.startsWith("https://example.test/"))).toBe(true);
    expect(documents.some((d) => d.text.length > 25_000)).toBe(true);
    const officialSessions = documents.filter((d) => d.sourceType === "official" && d.text.includes("Sessions provide a persistent memory layer"));
    expect(officialSessions.length).toBeGreaterThanOrEqual(2);
  });

  it("normalizes the HTML-ish document: no tags, no script text, entities decoded", () => {
    const page = corpus.get("https://example.test/blog/state-management-patterns-for-llm-agents");
    expect(page).toBeDefined();
    expect(page?.text).not.toMatch(/<\/?[a-z]/i);
    expect(page?.text).not.toContain("analytics");
    expect(page?.text).not.toMatch(/&(amp|mdash|#8217|nbsp);/);
    expect(page?.text).toContain("the agent\u2019s state");
    expect(page?.text).toContain("a < b");
  });
});

describe("Corpus.search", () => {
  it("ranks an official OpenAI Agents SDK sessions/state page first for the C04 query", () => {
    const hits = corpus.search(C04_QUERY, { sourceType: "official", limit: 3 });
    expect(hits).toHaveLength(3);
    expect(hits.every((h) => h.sourceType === "official")).toBe(true);
    const first = hits[0];
    expect(first?.url).toMatch(/^https:\/\/example\.test\/docs\/openai-agents-sdk\/(sessions|state-management)$/);
    expect(first?.title).toMatch(/OpenAI Agents SDK/);
    // Both official session/state pages outrank every other official document.
    expect(
      hits
        .slice(0, 2)
        .map((h) => h.url)
        .sort(),
    ).toEqual(["https://example.test/docs/openai-agents-sdk/sessions", "https://example.test/docs/openai-agents-sdk/state-management"]);
    expect(hits[0]!.score).toBeGreaterThanOrEqual(hits[1]!.score);
    expect(hits[1]!.score).toBeGreaterThanOrEqual(hits[2]!.score);
  });

  it("includes community and blog sources only when source_type is any", () => {
    const any = corpus.search(C04_QUERY, { sourceType: "any", limit: 10 });
    expect(any.some((h) => h.sourceType === "community")).toBe(true);
    expect(any.some((h) => h.sourceType === "blog")).toBe(true);
    const official = corpus.search(C04_QUERY, { sourceType: "official", limit: 10 });
    expect(official.length).toBeGreaterThan(0);
    expect(official.every((h) => h.sourceType === "official")).toBe(true);
    // The official ranking is the "any" ranking with the other sources removed.
    expect(official.map((h) => h.url)).toEqual(
      any
        .filter((h) => h.sourceType === "official")
        .map((h) => h.url)
        .slice(0, official.length),
    );
  });

  it("returns at most limit hits, all with a positive score", () => {
    for (const limit of [1, 2, 5]) {
      const hits = corpus.search("state", { sourceType: "any", limit });
      expect(hits).toHaveLength(limit);
      expect(hits.every((h) => h.score > 0)).toBe(true);
    }
  });

  it("returns only documents that match, even when limit allows more", () => {
    const hits = corpus.search("LangGraph checkpointers", { sourceType: "any", limit: 10 });
    expect(hits.length).toBeGreaterThan(0);
    expect(hits.length).toBeLessThan(corpus.documents.length);
    expect(hits[0]?.url).toBe("https://example.test/docs/langgraph/concepts/persistence");
  });

  it("returns nothing for a query without matching or searchable terms", () => {
    expect(corpus.search("zebra quasar marmalade", { sourceType: "any", limit: 10 })).toEqual([]);
    expect(corpus.search("the and of", { sourceType: "any", limit: 10 })).toEqual([]);
    expect(corpus.search("?!…", { sourceType: "any", limit: 10 })).toEqual([]);
  });

  it("builds bounded, markup-free snippets around the matched terms", () => {
    for (const query of ["tool_use tool_result", "script analytics state patterns", "additionalProperties allOf", C04_QUERY]) {
      for (const hit of corpus.search(query, { sourceType: "any", limit: 10 })) {
        expect(hit.snippet.length).toBeGreaterThan(0);
        expect(hit.snippet.length).toBeLessThanOrEqual(202);
        expect(hit.snippet).not.toMatch(/[<>]\/?[a-z]|&[a-z]+;|\n|`|\*\*/i);
      }
    }
    const [anthropic] = corpus.search("tool_result is_error", { sourceType: "official", limit: 1 });
    expect(anthropic?.snippet.toLowerCase()).toContain("is_error");
  });

  it("is deterministic and breaks score ties by URL", () => {
    const twin = (url: string): CorpusEntry => ({
      url,
      title: "Same title",
      sourceType: "blog",
      published: "2025-01-01",
      body: "identical body about checkpoints",
    });
    const tied = new Corpus([twin("https://example.test/b"), twin("https://example.test/c"), twin("https://example.test/a")]);
    const hits = tied.search("checkpoints", { sourceType: "any", limit: 3 });
    expect(hits.map((h) => h.url)).toEqual(["https://example.test/a", "https://example.test/b", "https://example.test/c"]);
    expect(new Set(hits.map((h) => h.score)).size).toBe(1);
    expect(corpus.search(C04_QUERY, { sourceType: "any", limit: 10 })).toEqual(corpus.search(C04_QUERY, { sourceType: "any", limit: 10 }));
  });

  it("weights title matches above body matches", () => {
    const docs = new Corpus([
      {
        url: "https://example.test/body",
        title: "Notes",
        sourceType: "blog",
        published: "2025-01-01",
        body: "a page that mentions checkpoints once among other words",
      },
      {
        url: "https://example.test/title",
        title: "Checkpoints",
        sourceType: "blog",
        published: "2025-01-01",
        body: "a page about other words entirely, nothing else here",
      },
    ]);
    expect(docs.search("checkpoints", { sourceType: "any", limit: 2 }).map((h) => h.url)).toEqual(["https://example.test/title", "https://example.test/body"]);
  });
});

describe("Corpus.get", () => {
  it("finds a document by URL, ignoring the fragment and host case", () => {
    expect(corpus.get("https://example.test/docs/openai-agents-sdk/sessions")?.title).toBe("OpenAI Agents SDK: Sessions");
    expect(corpus.get("https://EXAMPLE.test/docs/openai-agents-sdk/sessions#limits")?.title).toBe("OpenAI Agents SDK: Sessions");
    expect(corpus.get("https://example.test/docs/unknown")).toBeUndefined();
    expect(corpus.get("not a url")).toBeUndefined();
  });
});

describe("corpus validation", () => {
  const entry: CorpusEntry = { url: "https://example.test/x", title: "X", sourceType: "official", published: "2025-01-01", body: "text" };

  it("rejects duplicate URLs, bad source types and empty bodies", () => {
    expect(() => new Corpus([entry, { ...entry, url: "https://example.test/x#again" }])).toThrow(CorpusError);
    expect(() => new Corpus([{ ...entry, sourceType: "wiki" as never }])).toThrow(CorpusError);
    expect(() => new Corpus([{ ...entry, body: "<p> </p>" }])).toThrow(CorpusError);
    expect(() => new Corpus([{ ...entry, url: "relative/path" }])).toThrow(CorpusError);
  });

  it("reports a missing directory as a CorpusError", () => {
    expect(() => loadCorpus("/nonexistent/corpus")).toThrow(CorpusError);
  });
});
