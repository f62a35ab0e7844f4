/** Example: every broadcast subscriber receives every later message, in order. */
import * as z from "zod";
import { receive, subscribe, workflow } from "../../src/index.ts";

export const notifier = workflow("notifier", { input: z.object({ count: z.number().int().min(1).max(1000) }) }, async (ctx, { count }) => {
  await subscribe(ctx, "notifications", "broadcast");
  const received: unknown[] = [];
  for (let i = 0; i < count; i++) received.push((await receive(ctx, "notifications")).data);
  return { received };
});
