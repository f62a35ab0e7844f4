/**
 * Example: a realtime stream. `generate_summary` streams `tokens` tokens from
 * a local generator (no network: a stand-in for a model call) through
 * `ctx.stream`, one SSE event each on `GET /instances/:id/stream`; the
 * workflow then emits "done" and returns the text.
 *
 *   curl -N http://localhost:3000/instances/<id>/stream
 */
import * as z from "zod";
import { activity, emit, workflow } from "../../src/index.ts";

const WORDS = ["durable", "workflows", "replay", "their", "history", "so", "every", "token", "reaches", "the", "reader", "once"];

/** The i-th token of the local generator (deterministic, so a retry streams the same text). */
export const summaryToken = (i: number) => `${WORDS[i % WORDS.length]!}${i % 7 === 6 ? "." : ""} `;

const generate = activity(
  "generate_summary",
  async (ctx, tokens: number) => {
    let text = "";
    for (let i = 0; i < tokens; i++) {
      const token = summaryToken(i);
      ctx.stream.write(token, { topic: "tokens" });
      text += token;
      // A model yields between tokens; so does the generator (lets the stream's timer flush).
      if (i % 20 === 19) await new Promise((r) => setTimeout(r, 1));
    }
    await ctx.stream.close();
    return { tokens, length: text.length };
  },
  { transactional: false },
);

export const summarize = workflow(
  "summarize",
  {
    description: "Streams a summary token by token (GET /instances/:id/stream), then emits done.",
    input: z.object({ tokens: z.number().int().min(0).max(5000).default(200) }),
  },
  async (ctx, { tokens }) => {
    const r = await generate(ctx, tokens);
    await emit(ctx, "done", { topic: "status" });
    return r;
  },
);
