/** Example: a durable sleep. No worker is held while it waits. */
import * as z from "zod";
import { sleep, workflow } from "../../src/index.ts";

export const reminder = workflow("reminder", { description: "Sleeps durably for the given number of seconds, then completes.", input: z.object({ seconds: z.number().min(0).max(365 * 24 * 3600) }) }, async (ctx, { seconds }) => {
  await sleep(ctx, seconds);
  return { reminded: true };
});
