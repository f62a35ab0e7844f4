/** Example: `steps` sequential activities, one durable step each. */
import * as z from "zod";
import { activity, workflow } from "../../src/index.ts";

export const pipelineStep = activity("pipeline_step", async (ctx, n: number) => ({ n, at: ctx.activityId }));

export const pipeline = workflow(
  "pipeline",
  { description: "Runs the given number of activities one after another.", input: z.object({ steps: z.number().int().min(0).max(10_000) }) },
  async (ctx, { steps }) => {
    for (let i = 1; i <= steps; i++) await pipelineStep(ctx, i);
    return { completed: steps };
  },
);
