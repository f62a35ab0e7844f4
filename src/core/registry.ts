/**
 * Name → definition lookups the engine needs at run time: compensations are
 * stored by activity name and resolved when they run, possibly in another
 * process that loaded the same code.
 */
import type { Activity } from "./definitions.ts";

const activities = new Map<string, Activity>();

export function registerActivity(def: Activity): void {
  const existing = activities.get(def.activityName);
  if (existing && existing !== def && existing.fn !== def.fn) {
    // Same name, different code (e.g. a module loaded twice): last one wins, as with hot reload.
  }
  activities.set(def.activityName, def);
}

export function findActivity(name: string): Activity | undefined {
  return activities.get(name);
}
