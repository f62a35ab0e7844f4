/**
 * Which sweep tasks one sweep runs first, when the sweep has a CPU budget
 * (Workers Free: 10 ms of CPU per cron invocation, while an idle sweep of
 * every task costs ~25 ms). Pure, so the guarantees are properties:
 *
 * - The priority tasks (due timers, then expired message waits) lead every
 *   sweep: a sleeping workflow never waits for a slow rotation.
 * - The other tasks follow in their table order, rotated by the turn (the
 *   minute of the cron tick): the task at the head of the rotation always
 *   runs (see `mustRun`), and every task is at the head once every n turns,
 *   so each runs at least once every n minutes however small the budget —
 *   and sooner when the budget lets a sweep run several.
 */
export function sweepOrder<T>(tasks: readonly T[], priority: ReadonlySet<T>, turn: number): T[] {
  const first = tasks.filter((t) => priority.has(t));
  const rest = tasks.filter((t) => !priority.has(t));
  const n = rest.length;
  const offset = n === 0 ? 0 : ((Math.trunc(turn) % n) + n) % n;
  return [...first, ...rest.slice(offset), ...rest.slice(0, offset)];
}

/**
 * Whether the task at `position` of a budgeted sweep's order starts although
 * the budget is spent: the priority tasks and the head of the rotation do.
 */
export function mustRun(position: number, priorityCount: number): boolean {
  return position <= priorityCount;
}

/** The rotation's turn for a sweep at `nowMs`: one turn per minute (the cron period). */
export const rotationTurn = (nowMs: number): number => Math.floor(nowMs / 60_000);
