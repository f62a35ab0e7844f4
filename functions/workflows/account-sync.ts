/**
 * Example: a concurrency key. At most one `account_sync` per account runs at a
 * time (others wait in status `queued` and start in order); different
 * accounts run side by side. The sync holds its slot while it sleeps.
 */
import * as z from "zod";
import { activity, sleep, workflow } from "../../src/index.ts";

const pull = activity("pull_account", async (_ctx, account: string) => ({ account, records: 3 }));

export const accountSync = workflow(
  "account_sync",
  {
    description: "Syncs one account; at most one sync per account at a time.",
    input: z.object({ account: z.string().min(1).max(100), seconds: z.number().min(0).max(3600).default(2) }),
    concurrency: { key: (input: { account: string }) => input.account, limit: 1 },
  },
  async (ctx, { account, seconds }) => {
    const r = await pull(ctx, account);
    await sleep(ctx, seconds);
    return r;
  },
);
