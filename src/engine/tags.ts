/**
 * `setTags(ctx, { stage: "shipped" })`: add or change an instance's tags
 * from workflow code (core/tags.ts has the bounds). A built-in transactional
 * activity, so it is recorded in history like any other: on replay it
 * returns its recorded result and writes nothing again, and its write
 * commits with the step (or not at all). Keys it does not name are kept.
 * Bad tags are refused in the workflow code, before anything is recorded
 * (a ValidationError it can catch); more than MAX_TAGS keys in all fails the
 * activity terminally (TerminalError), nothing written.
 */
import type { WorkflowContext } from "../core/context.ts";
import { activity } from "../core/definitions.ts";
import { TerminalError, ValidationError } from "../core/errors.ts";
import { checkTags, type Tags } from "../core/tags.ts";
import { activityInternalsOf } from "./execute.ts";

const setTagsActivity = activity("edda.set_tags", async (ctx, tags: Tags): Promise<Tags> => {
  try {
    await activityInternalsOf(ctx).storage.setInstanceTags(ctx.instanceId, tags);
  } catch (err) {
    if (err instanceof ValidationError) throw new TerminalError(err.message);
    throw err;
  }
  return tags;
});

/** Add or change tags of this instance (recorded, replay-safe); resolves to the tags it set. */
export async function setTags(ctx: WorkflowContext, tags: Record<string, string>): Promise<Tags> {
  return setTagsActivity(ctx, checkTags(tags, "setTags: the tags"));
}
