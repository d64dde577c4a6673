import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { ResultEnvelope } from "@toolgate/contracts";
import { SCENARIOS, type ModelResponse, type TranscriptItem } from "@toolgate/models";

/** The wire dialects the fake speaks, as the official SDKs send and read them. */
export type FakeDialect = "openai-responses" | "openai-chat" | "anthropic" | "gemini";

/** One request the fake received, for assertions on what a model was actually sent. */
export interface RecordedRequest {
  dialect: FakeDialect;
  path: string;
  body: Record<string, unknown>;
}

type Json = Record<string, unknown>;

/** The result envelope inside an observation text (the wrapped form Toolgate sends, or a bare envelope). */
function resultOf(content: unknown): ResultEnvelope {
  const value = typeof content === "string" ? (JSON.parse(content) as Json) : (content as Json);
  return (value.result ?? value) as ResultEnvelope;
}

function toolItem(callId: string, name: string, content: unknown): TranscriptItem {
  return { role: "tool", call_id: callId, name, result: resultOf(content), content: typeof content === "string" ? content : JSON.stringify(content) };
}

/** Requests in each dialect, read back into the provider-neutral transcript the scripted scenarios play on. */
const decoders: Record<FakeDialect, (body: Json) => TranscriptItem[]> = {
  "openai-responses": (body) => {
    const items: TranscriptItem[] = [];
    const names = new Map<string, string>();
    let calls: { id: string; name: string; arguments: string }[] = [];
    const flush = () => {
      if (calls.length > 0) items.push({ role: "assistant", response: { kind: "tool_calls", calls } });
      calls = [];
    };
    for (const item of body.input as Json[]) {
      if (item.type === "function_call") {
        calls.push({ id: String(item.call_id), name: String(item.name), arguments: String(item.arguments) });
        names.set(String(item.call_id), String(item.name));
      } else if (item.type === "function_call_output") {
        flush();
        items.push(toolItem(String(item.call_id), names.get(String(item.call_id)) ?? "", item.output));
      } else if (item.role === "user") items.push({ role: "user", text: String(item.content) });
    }
    flush();
    return items;
  },
  "openai-chat": (body) => {
    const items: TranscriptItem[] = [];
    const names = new Map<string, string>();
    for (const m of body.messages as Json[]) {
      if (m.role === "user") items.push({ role: "user", text: String(m.content) });
      else if (m.role === "assistant") {
        const calls = ((m.tool_calls ?? []) as { id: string; function: { name: string; arguments: string } }[]).map((c) => ({
          id: c.id,
          name: c.function.name,
          arguments: c.function.arguments,
        }));
        for (const c of calls) names.set(c.id, c.name);
        items.push({ role: "assistant", response: { kind: "tool_calls", calls } });
      } else if (m.role === "tool") items.push(toolItem(String(m.tool_call_id), names.get(String(m.tool_call_id)) ?? "", m.content));
    }
    return items;
  },
  anthropic: (body) => {
    const items: TranscriptItem[] = [];
    const names = new Map<string, string>();
    for (const m of body.messages as Json[]) {
      if (typeof m.content === "string") items.push({ role: "user", text: m.content });
      else if (m.role === "assistant") {
        const calls = (m.content as Json[])
          .filter((b) => b.type === "tool_use")
          .map((b) => ({ id: String(b.id), name: String(b.name), arguments: JSON.stringify(b.input) }));
        for (const c of calls) names.set(c.id, c.name);
        items.push({ role: "assistant", response: { kind: "tool_calls", calls } });
      } else {
        for (const b of m.content as Json[])
          if (b.type === "tool_result") items.push(toolItem(String(b.tool_use_id), names.get(String(b.tool_use_id)) ?? "", b.content));
      }
    }
    return items;
  },
  gemini: (body) => {
    const items: TranscriptItem[] = [];
    for (const c of body.contents as { role: string; parts: Json[] }[]) {
      const calls = c.parts.filter((p) => p.functionCall).map((p) => p.functionCall as { id: string; name: string; args: unknown });
      const responses = c.parts.filter((p) => p.functionResponse).map((p) => p.functionResponse as { id: string; name: string; response: unknown });
      if (c.role === "model")
        items.push({
          role: "assistant",
          response: { kind: "tool_calls", calls: calls.map((f) => ({ id: f.id, name: f.name, arguments: JSON.stringify(f.args) })) },
        });
      else if (responses.length > 0) for (const r of responses) items.push(toolItem(r.id, r.name, r.response));
      else items.push({ role: "user", text: c.parts.map((p) => (typeof p.text === "string" ? p.text : "")).join("") });
    }
    return items;
  },
};

const USAGE = { input: 80, output: 20 };

/** A scripted response in each dialect's wire format, as the official SDKs read it. */
const encoders: Record<FakeDialect, (response: ModelResponse, model: string) => Json> = {
  "openai-responses": (r, model) => ({
    id: "resp_fake",
    object: "response",
    created_at: Math.floor(Date.now() / 1000),
    model,
    status: "completed",
    output:
      r.kind === "tool_calls"
        ? r.calls.map((c, i) => ({ type: "function_call", id: `fc_${i}`, call_id: c.id, name: c.name, arguments: c.arguments, status: "completed" }))
        : [
            {
              type: "message",
              id: "msg_fake",
              role: "assistant",
              status: "completed",
              content: [r.kind === "refusal" ? { type: "refusal", refusal: r.text } : { type: "output_text", text: r.text, annotations: [] }],
            },
          ],
    usage: {
      input_tokens: USAGE.input,
      output_tokens: USAGE.output,
      total_tokens: USAGE.input + USAGE.output,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens_details: { reasoning_tokens: 0 },
    },
    parallel_tool_calls: true,
    tool_choice: "auto",
    tools: [],
  }),
  "openai-chat": (r, model) => ({
    id: "chatcmpl_fake",
    object: "chat.completion",
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [
      {
        index: 0,
        finish_reason: r.kind === "tool_calls" ? "tool_calls" : "stop",
        logprobs: null,
        message:
          r.kind === "tool_calls"
            ? {
                role: "assistant",
                content: null,
                refusal: null,
                tool_calls: r.calls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: c.arguments } })),
              }
            : { role: "assistant", content: r.kind === "final" ? r.text : null, refusal: r.kind === "refusal" ? r.text : null },
      },
    ],
    usage: { prompt_tokens: USAGE.input, completion_tokens: USAGE.output, total_tokens: USAGE.input + USAGE.output },
  }),
  anthropic: (r, model) => ({
    id: "msg_fake",
    type: "message",
    role: "assistant",
    model,
    content:
      r.kind === "tool_calls"
        ? r.calls.map((c) => ({ type: "tool_use", id: c.id, name: c.name, input: JSON.parse(c.arguments) as unknown }))
        : [{ type: "text", text: r.text }],
    stop_reason: r.kind === "tool_calls" ? "tool_use" : r.kind === "refusal" ? "refusal" : "end_turn",
    stop_sequence: null,
    usage: { input_tokens: USAGE.input, output_tokens: USAGE.output },
  }),
  gemini: (r) => ({
    candidates: [
      {
        index: 0,
        finishReason: r.kind === "refusal" ? "SAFETY" : "STOP",
        content: {
          role: "model",
          parts:
            r.kind === "tool_calls"
              ? r.calls.map((c) => ({ functionCall: { id: c.id, name: c.name, args: JSON.parse(c.arguments) as unknown } }))
              : [{ text: r.text }],
        },
      },
    ],
    usageMetadata: { promptTokenCount: USAGE.input, candidatesTokenCount: USAGE.output, totalTokenCount: USAGE.input + USAGE.output },
  }),
};

/**
 * A local HTTP server that speaks the wire formats of OpenAI (Responses and Chat Completions), Anthropic
 * Messages and Gemini, answering with a scripted scenario named by the request's model. Lets the real SDKs
 * run against something, with no provider reachable; it records every request it receives.
 */
export class FakeProviders {
  readonly requests: RecordedRequest[] = [];
  readonly #server: Server;

  private constructor(server: Server) {
    this.#server = server;
  }

  static async start(): Promise<FakeProviders> {
    const server = createServer();
    const fake = new FakeProviders(server);
    server.on("request", (req, res) => void fake.#handle(req, res));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return fake;
  }

  /** The base URL to configure for a dialect's SDK. */
  baseUrl(dialect: FakeDialect): string {
    const { port } = this.#server.address() as AddressInfo;
    return dialect.startsWith("openai") ? `http://127.0.0.1:${port}/v1` : `http://127.0.0.1:${port}`;
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const path = (req.url ?? "").split("?")[0]!;
    const reply = (status: number, body: unknown) => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    };
    let dialect: FakeDialect;
    let model: string;
    const body = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}") as Json;
    if (path === "/v1/responses") [dialect, model] = ["openai-responses", String(body.model)];
    else if (path === "/v1/chat/completions") [dialect, model] = ["openai-chat", String(body.model)];
    else if (path === "/v1/messages") [dialect, model] = ["anthropic", String(body.model)];
    else if (/\/models\/[^/]+:generateContent$/.test(path)) [dialect, model] = ["gemini", /\/models\/([^/:]+):generateContent$/.exec(path)![1]!];
    else return reply(404, { error: { message: `no such endpoint ${path}` } });
    this.requests.push({ dialect, path, body });
    const scenario = SCENARIOS[model];
    if (!scenario) return reply(400, { error: { message: `unknown scripted model ${model}` } });
    try {
      reply(200, encoders[dialect](scenario(decoders[dialect](body)), model));
    } catch (error) {
      reply(500, { error: { message: (error as Error).message } });
    }
  }
}
