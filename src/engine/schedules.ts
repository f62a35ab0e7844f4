/**
 * The schedules sweep task: start the instance of each due cron tick.
 *
 * Per due row, one transaction: claim the row (FOR UPDATE SKIP LOCKED — a
 * concurrent sweep skips it), decide the tick (core/schedule.ts: the latest
 * that passed, or none when `missed: "skip"` and it is too late), create the
 * tick's instance under its deterministic id, move the row to the next tick.
 * A crash before the commit leaves the row due, and the retry creates the same
 * instance id; a second sweep that somehow reached the same tick finds the
 * instance and creates nothing. So each tick starts exactly one instance.
 *
 * The sweep is the clock: Workers' cron trigger (minute granularity), Deno's
 * `Deno.cron`, Node's interval sweeper. A 6-field (seconds) schedule fires as
 * often as the sweep runs and, when the sweep is slower, per the missed-tick
 * policy.
 */
import { normalizeSchedule, planDueTick, scheduledInstanceId, nextTick, type Schedule } from "../core/schedule.ts";
import type { Workflow } from "../core/definitions.ts";
import { NotFoundError } from "../core/errors.ts";
import type { InstanceStatus } from "../core/model.ts";
import type { ScheduleRecord } from "../storage/types.ts";
import type { DispatchScope } from "./dispatcher.ts";
import type { Uses } from "./deps.ts";
import { afterStart, createValidated, validateInput } from "./starts.ts";

/** Input of a scheduled instance. */
export interface ScheduledInput {
  /** The tick (ISO 8601, UTC) this instance was started for. */
  scheduledAt: string;
}

export function scheduledWorkflows(deps: Uses<"workflows">): { wf: Workflow; schedule: Schedule }[] {
  const out: { wf: Workflow; schedule: Schedule }[] = [];
  for (const wf of deps.workflows.values()) {
    if (wf.options.schedule !== undefined) out.push({ wf, schedule: normalizeSchedule(wf.workflowName, wf.options.schedule) });
  }
  return out;
}

/** When the app is built: a scheduled workflow's input schema must accept `{ scheduledAt }`. */
export function checkScheduledInputs(workflows: Iterable<Workflow>): void {
  for (const wf of workflows) {
    const input: ScheduledInput = { scheduledAt: new Date(0).toISOString() };
    if (wf.options.schedule !== undefined && wf.options.input && !wf.options.input.safeParse(input).success) {
      throw new TypeError(`workflow ${wf.workflowName} has a schedule, so its input schema must accept { scheduledAt: string }`);
    }
  }
}

const registered = new WeakSet<object>();

/** Upsert this engine's schedules (once per engine; a changed cron resets the row's next run). */
export async function registerSchedules(deps: Uses<"storage" | "workflows"> & Partial<Uses<"clock">>): Promise<void> {
  if (registered.has(deps)) return;
  const now = new Date(deps.clock?.() ?? Date.now());
  await deps.storage.registerSchedules(
    scheduledWorkflows(deps).map(({ wf, schedule }) => ({ workflowName: wf.workflowName, cron: schedule.cron, timezone: schedule.timezone, missed: schedule.missed, nextRunAt: nextTick(schedule, now) })),
  );
  registered.add(deps);
}

/** Start the instances of due ticks, at most `limit` rows; returns how many instances this call created. */
/**
 * The app's schedules with their next and last run. Registers them first, so a
 * fresh deployment lists its next runs before the first sweep.
 */
export async function listAppSchedules(deps: Uses<"storage" | "workflows"> & Partial<Uses<"clock">>): Promise<ScheduleRecord[]> {
  await registerSchedules(deps);
  return deps.storage.listSchedules(scheduledWorkflows(deps).map((s) => s.wf.workflowName));
}

export async function runDueSchedules(deps: Uses<"definitions" | "deployment" | "dispatcher" | "hooks" | "serviceName" | "storage" | "tracing" | "workflows"> & Partial<Uses<"clock">>, limit: number, scope?: DispatchScope, onStarted: (instanceId: string) => void = () => {}): Promise<number> {
  const scheduled = scheduledWorkflows(deps);
  if (scheduled.length === 0) return 0;
  await registerSchedules(deps);
  await deps.definitions.ensure(scheduled.map((s) => s.wf));
  const byName = new Map(scheduled.map((s) => [s.wf.workflowName, s]));
  let started = 0;
  for (let i = 0; i < limit; i++) {
    const outcome = await deps.storage.transaction(async (tx) => {
      const [due] = await tx.claimDueSchedules([...byName.keys()], 1);
      if (!due) return "none" as const;
      const { wf, schedule } = byName.get(due.workflowName)!;
      const plan = planDueTick(schedule, due.now);
      let ran: { at: Date; instanceId: string } | null = null;
      let created = false;
      if (plan.run) {
        const input: ScheduledInput = { scheduledAt: plan.run.toISOString() };
        const r = await createValidated(deps, tx, wf, validateInput(wf, input), { instanceId: scheduledInstanceId(wf.workflowName, plan.run) });
        ran = { at: plan.run, instanceId: r.instanceId };
        created = r.created;
        if (r.created) tx.afterCommit(() => afterStart(deps, wf, r.instanceId, input, scope, r.traceContext));
      }
      await tx.advanceSchedule(due.workflowName, plan.next, ran);
      // Created here (not found: a tick another sweep already started) is what counts as started.
      return ran && created ? ran.instanceId : ("handled" as const);
    });
    if (outcome === "none") break;
    if (outcome !== "handled") {
      started++;
      onStarted(outcome);
    }
  }
  return started;
}

// --- operator control: pause, resume, trigger now -----------------------------------

function scheduled(deps: Uses<"workflows">, workflowName: string): { wf: Workflow; schedule: Schedule } {
  const s = scheduledWorkflows(deps).find((x) => x.wf.workflowName === workflowName);
  if (!s) throw new NotFoundError(`workflow "${workflowName}" has no schedule in this app`);
  return s;
}

/** Pause a schedule: no sweep starts a tick of it until it is resumed (trigger-now still starts one). */
export async function pauseSchedule(deps: Uses<"storage" | "workflows">, workflowName: string): Promise<ScheduleRecord> {
  scheduled(deps, workflowName);
  await registerSchedules(deps);
  await deps.storage.pauseSchedule(workflowName);
  return scheduleRecord(deps, workflowName);
}

/** Resume a paused schedule from its next tick after now: the ticks missed while paused are not started. */
export async function resumeSchedule(deps: Uses<"storage" | "workflows">, workflowName: string): Promise<ScheduleRecord> {
  const { schedule } = scheduled(deps, workflowName);
  await registerSchedules(deps);
  await deps.storage.resumeSchedule(workflowName, nextTick(schedule, new Date()));
  return scheduleRecord(deps, workflowName);
}

async function scheduleRecord(deps: Uses<"storage">, workflowName: string): Promise<ScheduleRecord> {
  const [row] = await deps.storage.listSchedules([workflowName]);
  if (!row) throw new NotFoundError(`workflow "${workflowName}" has no schedule row`);
  return row;
}

/**
 * Start one instance of a scheduled workflow now, paused or not, with
 * `{ scheduledAt: now }`. Idempotent per `requestId`: the same request id
 * returns the instance it started (created=false).
 */
export async function triggerSchedule(
  deps: Uses<"definitions" | "deployment" | "dispatcher" | "hooks" | "serviceName" | "storage" | "tracing" | "workflows">,
  workflowName: string,
  requestId: string | undefined,
  scope?: DispatchScope,
): Promise<{ instanceId: string; status: InstanceStatus; created: boolean }> {
  const { wf } = scheduled(deps, workflowName);
  const input: ScheduledInput = { scheduledAt: new Date().toISOString() };
  const instanceId = `schedule:${workflowName}:manual:${requestId ?? crypto.randomUUID()}`;
  const r = await createValidated(deps, deps.storage, wf, validateInput(wf, input), { instanceId });
  if (r.created) afterStart(deps, wf, r.instanceId, input, scope, r.traceContext);
  return { instanceId: r.instanceId, status: r.status, created: r.created };
}
