/**
 * Example: debounce. Edits to one search index within 3 s of each other make
 * one `search_reindex` run, with the last input, once the index was quiet for
 * 3 s — and at the latest 30 s after the first edit of a burst.
 */
import * as z from "zod";
import { activity, workflow } from "../../src/index.ts";

const rebuild = activity("rebuild_index", async (_ctx, index: string, version: number) => ({ index, version }));

export const searchReindex = workflow(
  "search_reindex",
  {
    description: "Rebuilds a search index once a burst of edits is over (debounced per index).",
    input: z.object({ index: z.string().min(1).max(100), version: z.number().int() }),
    debounce: { key: (input: { index: string }) => input.index, periodSeconds: 3, maxWaitSeconds: 30 },
  },
  async (ctx, { index, version }) => rebuild(ctx, index, version),
);
