/**
 * An app's activities by name. Compensations are stored by activity name and
 * resolved when they run — possibly in another process, or in a request that
 * never replayed the workflow that registered them — so the engine needs
 * name → definition lookups. Each app has its own registry (`createEdda`
 * builds one): two apps in one process never see each other's activities,
 * and an activity name only has to be unique within the app that uses it.
 *
 * The registry fills itself from what the app's workflows do: every activity
 * a replay calls or registers as a compensation (and its `onFailure`) is
 * added. A name missing when a compensation runs is found by replaying the
 * workflow that registered it (step.ts).
 *
 * A name is recorded in history, so two different activities under one name
 * would replay each other's results: that is an error naming both. The same
 * code defined again (a module evaluated twice by a bundler or a test runner)
 * is accepted.
 */
import type { Activity } from "./activity.ts";

const firstLine = (fn: unknown) => String(fn).split("\n")[0]!.slice(0, 80);

export class ActivityRegistry {
  private readonly byName = new Map<string, Activity>();
  /** Test doubles by activity name (`edda-edge/testing`'s replaceActivity); empty in production. */
  private readonly doubles = new Map<string, Activity>();

  /**
   * Run `fn` wherever the activity `name` runs: the attempt, its retries and
   * its history record stay the engine's, only the function body differs.
   */
  replace(name: string, fn: Activity["fn"]): void {
    this.doubles.set(name, fn as never);
  }

  /** What runs for `def`: its test double when one is set, else `def` itself. */
  implementation(def: Activity): Activity {
    if (this.doubles.size === 0) return def;
    const fn = this.doubles.get(def.activityName);
    return fn ? (Object.create(def, { fn: { value: fn } }) as Activity) : def;
  }

  /** Add `def` (and its `onFailure` compensation); a different activity under a known name is a TypeError. */
  add(def: Activity): void {
    const existing = this.byName.get(def.activityName);
    if (existing === def) return;
    if (existing && String(existing.fn) !== String(def.fn)) {
      throw new TypeError(
        `activity name "${def.activityName}" is defined twice: first as ${firstLine(existing.fn)} …, again as ${firstLine(def.fn)} … — names are recorded in history and must be unique within an app`,
      );
    }
    this.byName.set(def.activityName, def);
    if (def.options.onFailure) this.add(def.options.onFailure as Activity);
  }

  find(name: string): Activity | undefined {
    const def = this.byName.get(name);
    return def && this.implementation(def);
  }
}
