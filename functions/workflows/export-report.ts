/**
 * Example: timeouts. The whole run has 5 s (`timeoutSeconds`): a run still
 * unfinished then fails with `WorkflowTimeoutError` and its compensations run
 * (the draft is discarded). Each render attempt has 1 s (the activity's
 * `timeoutSeconds`): a slower attempt is abandoned — its transaction rolls
 * back, `ctx.signal` aborts — and counts as a failed attempt
 * (`ActivityTimeoutError`); after the second, the run fails with
 * `RetryExhaustedError` and the draft is discarded too.
 */
import * as z from "zod";
import { activity, registerCompensation, sleep, workflow } from "../../src/index.ts";

const createDraft = activity("create_draft", async (ctx, name: string) => ({ draftId: `draft-${name}-${ctx.instanceId}` }));
export const discardDraft = activity("discard_draft", async (_ctx, draftId: string) => ({ discarded: draftId }));

const renderExport = activity(
  "render_export",
  async (ctx, ms: number) => {
    // Honour the signal: an abandoned attempt stops here instead of finishing work nothing will record.
    await new Promise<void>((resolve, reject) => {
      const t = setTimeout(resolve, ms);
      ctx.signal.addEventListener("abort", () => (clearTimeout(t), reject(ctx.signal.reason as Error)), { once: true });
    });
    return { pages: 3 };
  },
  { timeoutSeconds: 1, retry: { maxAttempts: 2, initialIntervalSeconds: 1 } },
);

export const exportReport = workflow(
  "export_report",
  {
    description: "Renders an export under a 5 s run deadline and a 1 s limit per render attempt; a run past either is failed and its draft discarded.",
    timeoutSeconds: 5,
    input: z.object({
      name: z.string().min(1).max(100),
      renderMs: z.number().int().min(0).max(10_000).default(0).describe("How long one render attempt takes (over 1000 ms: each attempt times out)"),
      waitSeconds: z.number().min(0).max(3600).default(0).describe("A durable wait after rendering (over the 5 s deadline: the run times out)"),
    }),
  },
  async (ctx, { name, renderMs, waitSeconds }) => {
    const { draftId } = await createDraft(ctx, name);
    await registerCompensation(ctx, discardDraft, draftId);
    const { pages } = await renderExport(ctx, renderMs);
    if (waitSeconds > 0) await sleep(ctx, waitSeconds);
    return { draftId, pages };
  },
);
