/**
 * Workflow and activity definitions. Names are explicit strings: bundlers
 * minify function names, and the name is what history records.
 *
 * An activity is a callable: `await reserve(ctx, orderId)` inside a workflow
 * asks the replay engine for its recorded result, or schedules it for
 * execution at the step boundary.
 */
import type { z } from "zod";
import type { WorkflowContext } from "./context.ts";
import type { Activity, ActivityFn, ActivityOptions } from "./activity.ts";
import { callActivity } from "./operation.ts";
import { normalizeSchedule, type ScheduleOption } from "./schedule.ts";
import { checkFlowControl, type FlowControlOptions } from "./flow-control.ts";

export type { Activity, ActivityFn, ActivityOptions } from "./activity.ts";

const NAME_RE = /^[A-Za-z0-9_.-]{1,200}$/;

function checkName(kind: string, name: string) {
  if (!NAME_RE.test(name)) throw new TypeError(`${kind} name ${JSON.stringify(name)} must match ${NAME_RE}`);
}

function checkTimeout(what: string, t: number | undefined) {
  if (t !== undefined && !(Number.isFinite(t) && t > 0)) throw new TypeError(`${what}: timeoutSeconds must be a positive number, got ${t}`);
}

export function activity<A extends unknown[], R>(
  name: string,
  fn: ActivityFn<A, R>,
  options: ActivityOptions<A, Awaited<R>> = {},
): Activity<A, Awaited<R>> {
  checkName("activity", name);
  checkTimeout(`activity ${name}`, options.timeoutSeconds);
  const def = ((ctx: WorkflowContext, ...args: A) => callActivity(ctx, def, args)) as Activity<A, Awaited<R>>;
  Object.defineProperties(def, {
    activityName: { value: name },
    fn: { value: fn },
    options: { value: options },
    withId: { value: (id: string) => (ctx: WorkflowContext, ...args: A) => callActivity(ctx, def, args, id) },
  });
  return def;
}

export interface WorkflowOptions<S extends z.ZodType | undefined> extends FlowControlOptions {
  /** zod schema for the input; failures are 422 at the API. */
  input?: S;
  /** What the workflow does, for people and AI assistants (the MCP tool description, API docs). */
  description?: string;
  /** Lease length for this workflow's steps (default: the app's, 300 s). */
  lockTimeoutSeconds?: number;
  /** Start this workflow when a CloudEvent of this type (default: the workflow name) arrives. */
  eventHandler?: boolean | string;
  /**
   * Limit on the whole run, from its start: past it the run fails with
   * WorkflowTimeoutError, its compensations run and its children are cancelled.
   */
  timeoutSeconds?: number;
  /**
   * Start one instance per cron tick (`"0 9 * * *"`, or `{ cron, timezone,
   * missed }`), with input `{ scheduledAt }` (core/schedule.ts).
   */
  schedule?: ScheduleOption;
  /**
   * Tags (search attributes) of each instance, from its input, stored with it
   * at the start: `GET /instances?tag=orderId:o-1`. Bounded (core/tags.ts);
   * a function that throws or returns bad tags refuses the start (ValidationError).
   * `setTags(ctx, …)` adds or changes tags later from workflow code.
   */
  tags?: (input: S extends z.ZodType ? z.output<S> : any) => Record<string, string>;
  /**
   * Which code finishes an instance after a deploy (engine/versioning.ts, docs/deploying.md).
   * `"auto"` (default): a newer deployment continues it when its history replays with the new
   * code (checked once per instance), else it stays on the deployment that started it.
   * `"pinned"`: it always finishes on that deployment (or an operator upgrades it).
   */
  versioning?: "pinned" | "auto";
  // concurrency, rateLimit, debounce, singleton: core/flow-control.ts.
}

export type WorkflowFn<I, O> = (ctx: WorkflowContext, input: I) => Promise<O>;

/**
 * `I`/`O`: the input the function receives and what it returns; `N`: the
 * name as a literal type and `In`: the input a caller sends (before the
 * schema's defaults and transforms), so a typed client can check `start()`.
 */
export interface Workflow<I = any, O = any, N extends string = string, In = I> {
  readonly workflowName: N;
  readonly fn: WorkflowFn<I, O>;
  readonly options: WorkflowOptions<z.ZodType | undefined>;
  /** The text the source hash is computed from. */
  readonly source: string;
  readonly __types?: { input: I; output: O; startInput: In };
}

/** The input a workflow with input schema `S` receives (after the schema's defaults and transforms). */
export type InputOf<S> = S extends z.ZodType ? z.output<S> : unknown;
/** The input a caller sends to start a workflow with input schema `S`. */
export type StartInputOf<S> = S extends z.ZodType ? z.input<S> : unknown;

export function workflow<S extends z.ZodType | undefined = undefined, O = unknown, N extends string = string>(
  name: N,
  options: WorkflowOptions<S>,
  fn: WorkflowFn<InputOf<S>, O>,
): Workflow<InputOf<S>, O, N, StartInputOf<S>>;
export function workflow<I = unknown, O = unknown, N extends string = string>(name: N, fn: WorkflowFn<I, O>): Workflow<I, O, N>;
export function workflow(name: string, a: unknown, b?: unknown): Workflow {
  checkName("workflow", name);
  const options = (typeof a === "function" ? {} : a) as WorkflowOptions<z.ZodType | undefined>;
  const fn = (typeof a === "function" ? a : b) as WorkflowFn<unknown, unknown>;
  if (typeof fn !== "function") throw new TypeError(`workflow ${name}: missing function`);
  checkTimeout(`workflow ${name}`, options.timeoutSeconds);
  if (options.schedule !== undefined) normalizeSchedule(name, options.schedule);
  checkFlowControl(name, options);
  if (options.versioning !== undefined && options.versioning !== "pinned" && options.versioning !== "auto") {
    throw new TypeError(`workflow ${name}: versioning must be "pinned" or "auto" (got ${JSON.stringify(options.versioning)})`);
  }
  return { workflowName: name, fn, options, source: fn.toString() };
}

export type WorkflowInput<W> = W extends Workflow<infer I, any, any, any> ? I : never;
export type WorkflowOutput<W> = W extends Workflow<any, infer O, any, any> ? O : never;
