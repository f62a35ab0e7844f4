/**
 * Example: wait for a human decision sent to this instance
 * (`POST /instances/:id/messages` with channel "approval"), or time out.
 */
import * as z from "zod";
import { MessageTimeoutError, waitMessage, workflow } from "../../src/index.ts";

const decision = z.object({ approved: z.boolean(), approver: z.string() });

export const approval = workflow(
  "approval",
  {
    description: 'Waits for a human decision: send { "approved": true|false, "approver": "..." } to the instance on channel "approval"; ends "timeout" when none comes in time.',
    input: z.object({ requestId: z.string().min(1), timeoutSeconds: z.number().positive().describe("How long to wait for the decision") }),
  },
  async (ctx, { timeoutSeconds }) => {
    try {
      const msg = await waitMessage(ctx, "approval", { timeoutSeconds });
      const d = decision.parse(msg.data);
      return { status: d.approved ? ("approved" as const) : ("rejected" as const), approver: d.approver };
    } catch (err) {
      if (err instanceof MessageTimeoutError) return { status: "timeout" as const };
      throw err;
    }
  },
);
