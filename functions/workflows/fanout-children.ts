/**
 * Example: child workflows. Invokes `pipeline` with `{ steps: 3 }` `count`
 * times in parallel and returns each child's output. Each child is its own
 * instance (linked to this one in the API and the viewer), started exactly
 * once with the step that reaches it; each child's completion wakes this
 * instance at once. Cancelling this instance cancels the children still running.
 */
import * as z from "zod";
import { invoke, workflow } from "../../src/index.ts";
import { pipeline } from "./pipeline.ts";

export const fanoutChildren = workflow(
  "fanout_children",
  { description: "Runs `count` pipeline workflows of 3 steps as parallel children and collects their outputs.", input: z.object({ count: z.number().int().min(0).max(100) }) },
  async (ctx, { count }) => {
    const outputs = await Promise.all(Array.from({ length: count }, () => invoke(ctx, pipeline, { steps: 3 })));
    return { completed: outputs.map((o) => o.completed) };
  },
);
