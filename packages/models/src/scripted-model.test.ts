import { describe, expect, it } from "vitest";
import type { TranscriptItem } from "./model.js";
import { scriptedModel } from "./scripted-model.js";

describe("scripted model", () => {
  it("plays C04: search, then fetch the first result, then save to the task named in its context", async () => {
    const model = scriptedModel("c04")!;
    const transcript: TranscriptItem[] = [{ role: "user", text: "task_id=task_42: research" }];
    const first = await model.respond(transcript);
    expect(first).toMatchObject({ kind: "tool_calls", calls: [{ id: "call_01", name: "search_sources" }] });
    transcript.push({ role: "assistant", response: first });
    transcript.push({
      role: "tool",
      content: "",
      call_id: "call_01",
      name: "search_sources",
      result: { ok: true, retryable: false, call_id: "call_01M8KHXH7NQ308R8J60HB476AB", data: { items: [{ url: "https://example.test/a" }] } },
    });
    const second = await model.respond(transcript);
    expect(second.kind === "tool_calls" && JSON.parse(second.calls[0]!.arguments)).toEqual({ url: "https://example.test/a" });
    transcript.push({ role: "assistant", response: second });
    transcript.push({
      role: "tool",
      content: "",
      call_id: "call_02",
      name: "fetch_document",
      result: {
        ok: true,
        retryable: false,
        call_id: "call_01M8KHXH7NQ308R8J60HB476AC",
        data: { url: "https://example.test/a", text: "Sessions provide a persistent memory layer. More." },
      },
    });
    const third = await model.respond(transcript);
    expect(third.kind === "tool_calls" && JSON.parse(third.calls[0]!.arguments)).toMatchObject({
      task_id: "task_42",
      quote: "Sessions provide a persistent memory layer.",
    });
  });

  it("stops with a final answer when a call fails, and knows no unknown scenario", async () => {
    const model = scriptedModel("c04")!;
    const transcript: TranscriptItem[] = [
      { role: "user", text: "task_id=t" },
      { role: "assistant", response: { kind: "tool_calls", calls: [{ id: "call_01", name: "search_sources", arguments: "{}" }] } },
      {
        role: "tool",
        content: "",
        call_id: "call_01",
        name: "search_sources",
        result: { ok: false, retryable: true, call_id: "call_01M8KHXH7NQ308R8J60HB476AB", error: { code: "TIMEOUT", message: "slow" } },
      },
    ];
    expect(await model.respond(transcript)).toMatchObject({ kind: "final", text: expect.stringContaining("TIMEOUT") as string });
    expect(scriptedModel("nope")).toBeUndefined();
  });
});
