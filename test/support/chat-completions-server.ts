// A scripted OpenAI-compatible Chat Completions server for tests: node:http
// on 127.0.0.1, `POST /v1/chat/completions` answers the n-th request with the
// n-th scripted reply — streamed as Server-Sent Events (`chat.completion.chunk`
// deltas, then `data: [DONE]`) when the request asks `stream: true`, one
// `chat.completion` JSON otherwise — or with an HTTP error. It keeps every
// request body, so a test counts the completions the model was asked for.
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";

export type ScriptedReply =
  | { text: string; toolCalls?: never }
  | { text?: string; toolCalls: { name: string; arguments: unknown }[] }
  | { status: number; body?: string };

export interface ChatCompletionsServer {
  /** The base URL to configure (`…/v1`). */
  baseUrl: string;
  /** The request bodies received, in order. */
  requests: { model: string; stream?: boolean; messages: { role: string; content?: unknown; tool_calls?: unknown }[] }[];
  close(): Promise<void>;
}

const read = async (req: IncomingMessage): Promise<string> => {
  let body = "";
  for await (const chunk of req) body += String(chunk);
  return body;
};

/** Splits text into a few deltas, as a model streams it. */
const deltas = (text: string): string[] => text.match(/.{1,6}/gs) ?? [];

export async function startChatCompletionsServer(script: ScriptedReply[]): Promise<ChatCompletionsServer> {
  const requests: ChatCompletionsServer["requests"] = [];
  const server = createServer((req, res) => {
    void (async () => {
      const raw = await read(req);
      if (req.method !== "POST" || req.url !== "/v1/chat/completions") {
        res.writeHead(404).end();
        return;
      }
      const body = JSON.parse(raw) as ChatCompletionsServer["requests"][number];
      requests.push(body);
      const reply = script[requests.length - 1];
      if (!reply || "status" in reply) {
        res.writeHead(reply?.status ?? 500, { "content-type": "application/json" }).end(reply?.body ?? JSON.stringify({ error: { message: `no scripted reply ${requests.length}` } }));
        return;
      }
      const id = `chatcmpl-${requests.length}`;
      const toolCalls = (reply.toolCalls ?? []).map((c, i) => ({ id: `call_${requests.length}_${i}`, type: "function", function: { name: c.name, arguments: JSON.stringify(c.arguments) } }));
      const finish = toolCalls.length ? "tool_calls" : "stop";
      const usage = { prompt_tokens: 20, completion_tokens: 8, total_tokens: 28 };
      if (!body.stream) {
        const message = { role: "assistant", content: reply.text ?? null, ...(toolCalls.length ? { tool_calls: toolCalls } : {}) };
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ id, object: "chat.completion", created: 0, model: body.model, choices: [{ index: 0, message, finish_reason: finish }], usage }));
        return;
      }
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      const chunk = (delta: unknown, finishReason: string | null = null, extra: object = {}) =>
        res.write(`data: ${JSON.stringify({ id, object: "chat.completion.chunk", created: 0, model: body.model, choices: [{ index: 0, delta, finish_reason: finishReason }], ...extra })}\n\n`);
      chunk({ role: "assistant", content: "" });
      for (const d of deltas(reply.text ?? "")) chunk({ content: d });
      toolCalls.forEach((c, index) => chunk({ tool_calls: [{ index, ...c }] }));
      chunk({}, finish, { usage });
      res.end("data: [DONE]\n\n");
    })().catch((err: unknown) => res.writeHead(500).end(String(err)));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
