/**
 * Example: a singleton. While a deploy of an environment is unfinished, a
 * start for that environment returns the running deploy's id instead of a
 * second deploy (HTTP 200, not 201); another environment deploys alongside.
 */
import * as z from "zod";
import { activity, sleep, workflow } from "../../src/index.ts";

const roll = activity("roll_out", async (_ctx, env: string, version: string) => ({ env, version }));

export const environmentDeploy = workflow(
  "environment_deploy",
  {
    description: "Deploys a version to an environment; one deploy per environment at a time (singleton).",
    input: z.object({ env: z.string().min(1).max(50), version: z.string().min(1).max(50), seconds: z.number().min(0).max(3600).default(5) }),
    singleton: { key: (input: { env: string }) => input.env },
  },
  async (ctx, { env, version, seconds }) => {
    await sleep(ctx, seconds);
    return roll(ctx, env, version);
  },
);
