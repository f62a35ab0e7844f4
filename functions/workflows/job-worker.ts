/**
 * Example: a looping worker on a competing queue. Each run receives one job,
 * processes it, and recurs with fresh history under the same instance id; the
 * subscription survives `recur`, so no job published between runs is missed.
 */
import * as z from "zod";
import { activity, receive, subscribe, workflow } from "../../src/index.ts";

export const processJob = activity("process_job", async (_ctx, job: unknown) => ({ done: true, job }));

export const jobWorker = workflow(
  "job_worker",
  { input: z.object({ workerId: z.string().min(1), remaining: z.number().int().min(0), processed: z.array(z.string()).optional() }) },
  async (ctx, { workerId, remaining, processed = [] }) => {
    if (remaining <= 0) return { workerId, processed };
    await subscribe(ctx, "jobs", "competing");
    const msg = await receive(ctx, "jobs");
    await processJob(ctx, msg.data);
    return ctx.recur({ workerId, remaining: remaining - 1, processed: [...processed, msg.id] });
  },
);
