import { describe, expect, it } from "vitest";
import { DEFAULT_FETCH_MAX_CHARS, normalizeText, truncateText } from "./index.js";

describe("normalizeText", () => {
  it("drops scripts, styles, comments and navigation with their content, and strips tags", () => {
    const raw =
      '<html><head><title>T</title></head><body><!-- hidden note --><nav><a href="/">Home</a></nav><script>track("x")</script><style>p{color:red}</style><p>Hello <em>agent</em> world</p></body></html>';
    expect(normalizeText(raw)).toBe("Hello agent world");
  });

  it("turns block elements into paragraph breaks and list items into lines", () => {
    const raw = "<h2>Title</h2><p>First   paragraph\tcontinues.</p><ul><li>one</li><li>two</li></ul><p>Last</p>";
    expect(normalizeText(raw)).toBe("Title\n\nFirst paragraph continues.\n\none\ntwo\n\nLast");
  });

  it("decodes named and numeric entities once, after tags are gone", () => {
    expect(normalizeText("a &amp; b &lt;script&gt; &#8217; &#x2019; &mdash; &nbsp;x &amp;lt; &bogus; &constructor;")).toBe(
      "a & b <script> \u2019 \u2019 \u2014 x &lt; &bogus; &constructor;",
    );
  });

  it("keeps prose comparisons that only look like tags", () => {
    expect(normalizeText("if a < b and c > d then <b>bold</b>")).toBe("if a < b and c > d then bold");
  });

  it("unwraps light markdown: headings, fences, bold, backticks, links, quotes", () => {
    const raw = "# Sessions\n\n**Note:** call `Runner.run` and see [the docs](https://example.test/x).\n\n```\ncode();\n```\n\n> quoted";
    expect(normalizeText(raw)).toBe("Sessions\n\nNote: call Runner.run and see the docs.\n\ncode();\n\nquoted");
  });

  it("removes control characters and collapses blank-line runs to one paragraph break", () => {
    expect(normalizeText("a\u0000b\r\n\r\n\r\n\r\nc\u0007  \n")).toBe("ab\n\nc");
  });
});

describe("truncateText", () => {
  it("leaves short text alone and reports no truncation", () => {
    expect(truncateText("short text", 100)).toEqual({ text: "short text", truncated: false });
  });

  it("cuts at the limit and says so", () => {
    const result = truncateText("x".repeat(50), 20);
    expect(result).toEqual({ text: "x".repeat(20), truncated: true });
  });

  it("never splits a surrogate pair", () => {
    const result = truncateText(`${"a".repeat(9)}\u{1F600}tail`, 10);
    expect(result.text).toBe("a".repeat(9));
    expect(result.truncated).toBe(true);
  });

  it("defaults to 20,000 characters", () => {
    expect(DEFAULT_FETCH_MAX_CHARS).toBe(20_000);
    const result = truncateText("y".repeat(25_000));
    expect(result.text.length).toBe(20_000);
    expect(result.truncated).toBe(true);
  });
});
