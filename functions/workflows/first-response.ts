/**
 * Example: wait for the first of a reply and a deadline. A message sent to
 * this instance on channel "response" (`POST /instances/:id/messages`) wins
 * if it comes before `timeoutSeconds`; otherwise the timer wins. The race is
 * one recorded operation, so a replay always returns the same winner, and a
 * reply that arrives after the timer won stays in the channel (nothing reads
 * it here, nothing loses it).
 */
import * as z from "zod";
import { onMessage, onTimer, race, workflow } from "../../src/index.ts";

export const firstResponse = workflow(
  "first_response",
  {
    description: 'Waits for a message on channel "response" sent to the instance, or the timer, whichever comes first.',
    input: z.object({ requestId: z.string().min(1), timeoutSeconds: z.number().positive().describe("How long to wait for the response") }),
  },
  async (ctx, { timeoutSeconds }) => {
    const first = await race(ctx, { message: onMessage("response"), timer: onTimer(timeoutSeconds) });
    return first.winner === "message" ? { winner: "message" as const, data: first.value.data } : { winner: "timer" as const };
  },
);
