/**
 * Example: a large value. One activity returns a report of `sizeKiB` KiB and
 * the workflow returns it with the note. Over the large-value threshold
 * (256 KiB) the activity's result and the output are stored once each in
 * `workflow_payloads` and the history keeps a reference, so no history row
 * holds the report and the API still answers it whole (docs/payloads.md).
 */
import * as z from "zod";
import { activity, workflow } from "../../src/index.ts";

const LINE = "0123456789abcdef".repeat(4) + "\n"; // 65 characters

const renderReport = activity("render_report", async (_ctx, sizeKiB: number) => {
  const size = sizeKiB * 1024;
  const body = LINE.repeat(Math.ceil(size / LINE.length)).slice(0, size);
  return { bytes: size, body };
});

export const largeReport = workflow(
  "large_report",
  {
    description: "Renders a report of sizeKiB KiB in one activity and returns it with the note: values over 256 KiB are stored by reference.",
    input: z.object({
      sizeKiB: z.number().int().min(0).max(16 * 1024).describe("The report's size in KiB (at most 16 MiB)"),
      note: z.string().max(1000).optional(),
    }),
  },
  async (ctx, { sizeKiB, note }) => {
    const report = await renderReport(ctx, sizeKiB);
    return { note: note ?? null, bytes: report.bytes, report: report.body };
  },
);
