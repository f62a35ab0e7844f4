/**
 * Name → definition lookups the engine needs at run time: compensations are
 * stored by activity name and resolved when they run, possibly in another
 * process that loaded the same code.
 *
 * A name is recorded in history, so two different activities under one name
 * would replay each other's results: that is an error at definition time. The
 * same code defined again (a module evaluated twice by a bundler or a test
 * runner) is accepted.
 */
import type { Activity } from "./definitions.ts";

const activities = new Map<string, Activity>();

const firstLine = (fn: unknown) => String(fn).split("\n")[0]!.slice(0, 80);

export function registerActivity(def: Activity): void {
  const existing = activities.get(def.activityName);
  if (existing && existing !== def && String(existing.fn) !== String(def.fn)) {
    throw new TypeError(
      `activity name "${def.activityName}" is defined twice: first as ${firstLine(existing.fn)} …, again as ${firstLine(def.fn)} … — names are recorded in history and must be unique`,
    );
  }
  activities.set(def.activityName, def);
}

export function findActivity(name: string): Activity | undefined {
  return activities.get(name);
}
