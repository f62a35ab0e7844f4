/**
 * Schedules: `workflow(name, { schedule: "0 9 * * *" }, fn)` starts one
 * instance per cron tick. Pure: parsing and tick arithmetic (croner, 5-field
 * or 6-field with seconds, IANA time zones); the engine's sweep task claims a
 * due schedule row, starts the tick's instance and moves the row on, in one
 * transaction.
 *
 * Exactly once per tick: the instance id is a function of the workflow and
 * the tick (`schedule:{name}:{tick ISO}`), so two sweeps racing for one tick
 * — or one retried after a crash — start one instance.
 *
 * Missed ticks (the app was down, or the sweep ran late): at most one
 * instance per sweep, for the latest tick that passed. `missed: "latest"`
 * (default) starts it however late; `missed: "skip"` starts it only within
 * `graceSeconds` of its time (default 120 s, two Workers cron minutes), else
 * skips to the next tick.
 */
import { Cron } from "croner";

export type MissedTicks = "skip" | "latest";

export interface ScheduleSpec {
  /** 5 fields (minute…weekday) or 6 (seconds first). */
  cron: string;
  /** IANA time zone the cron is read in (default UTC). */
  timezone?: string;
  missed?: MissedTicks;
  /** With `missed: "skip"`: how late a tick may still start (default 120 s). */
  graceSeconds?: number;
}

export type ScheduleOption = string | ScheduleSpec;

export interface Schedule {
  cron: string;
  timezone: string;
  missed: MissedTicks;
  graceSeconds: number;
}

const DEFAULT_GRACE_SECONDS = 120;

function parse(s: Schedule): Cron {
  return new Cron(s.cron, { paused: true, timezone: s.timezone, mode: "5-or-6-parts" });
}

/** Validate a workflow's schedule option; a TypeError names the workflow and the fault. */
export function normalizeSchedule(workflowName: string, option: ScheduleOption): Schedule {
  const spec: ScheduleSpec = typeof option === "string" ? { cron: option } : option;
  if (typeof spec !== "object" || spec === null || typeof spec.cron !== "string") throw new TypeError(`workflow ${workflowName}: schedule must be a cron string or { cron, timezone?, missed? }`);
  const missed = spec.missed ?? "latest";
  if (missed !== "skip" && missed !== "latest") throw new TypeError(`workflow ${workflowName}: schedule.missed must be "skip" or "latest"`);
  const graceSeconds = spec.graceSeconds ?? DEFAULT_GRACE_SECONDS;
  if (!(Number.isFinite(graceSeconds) && graceSeconds >= 0)) throw new TypeError(`workflow ${workflowName}: schedule.graceSeconds must be a number ≥ 0`);
  const schedule: Schedule = { cron: spec.cron.trim(), timezone: spec.timezone ?? "UTC", missed, graceSeconds };
  try {
    if (parse(schedule).nextRun(new Date()) === null) throw new Error("it never fires");
  } catch (err) {
    throw new TypeError(`workflow ${workflowName}: invalid schedule "${schedule.cron}" (${schedule.timezone}): ${(err as Error).message}`, { cause: err });
  }
  return schedule;
}

/** The first tick strictly after `after` (null: the pattern never fires again). */
export function nextTick(s: Schedule, after: Date): Date | null {
  return parse(s).nextRun(after);
}

export interface TickPlan {
  /** The tick to start an instance for now, if any. */
  run: Date | null;
  /** When the schedule is due next. */
  next: Date | null;
}

/**
 * A schedule row came due (`now` ≥ its next run, both the database's clock):
 * which tick to start, and the next due time.
 */
export function planDueTick(s: Schedule, now: Date): TickPlan {
  const cron = parse(s);
  // Ticks fall on whole seconds, and croner's previousRuns leaves out the second its
  // reference falls in: from the next whole second, a sweep in the tick's own
  // second (a cron trigger fires on the minute) starts that tick, not the one before.
  const latest = cron.previousRuns(1, new Date(Math.floor(now.getTime() / 1000) * 1000 + 1000))[0] ?? null;
  const next = cron.nextRun(now);
  if (!latest) return { run: null, next };
  const late = (now.getTime() - latest.getTime()) / 1000;
  const run = s.missed === "latest" || late <= s.graceSeconds ? latest : null;
  return { run, next };
}

/** The instance id of a tick: the same for every sweep, so a tick starts one instance. */
export function scheduledInstanceId(workflowName: string, tick: Date): string {
  return `schedule:${workflowName}:${tick.toISOString()}`;
}
