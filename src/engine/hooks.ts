/**
 * Lifecycle hooks (observability). They run after the commit that made the
 * event true, so a hook never reports something that was rolled back; a hook
 * that throws — or returns a promise that rejects — is logged and ignored
 * (`guardHooks`), so it can neither fail a step nor become an unhandled
 * rejection (fatal on Node and Deno). Activity hooks fire on every attempt,
 * including steps resumed after a crash.
 */
export interface WorkflowInfo {
  instanceId: string;
  workflowName: string;
}

export interface ActivityInfo extends WorkflowInfo {
  activityId: string;
  activityName: string;
  attempt: number;
}

export interface EngineHooks {
  onWorkflowStart?(info: WorkflowInfo & { input: unknown }): void;
  onWorkflowComplete?(info: WorkflowInfo & { output: unknown }): void;
  onWorkflowFailed?(info: WorkflowInfo & { error: unknown }): void;
  onWorkflowCancelled?(info: WorkflowInfo): void;
  onActivityStart?(info: ActivityInfo): void;
  onActivityComplete?(info: ActivityInfo & { result: unknown }): void;
  onActivityFailed?(info: ActivityInfo & { error: unknown }): void;
  onActivityRetry?(info: ActivityInfo & { error: unknown; retryInSeconds: number }): void;
}

/** The hooks with every call guarded: sync throws and async rejections are logged, never propagated. */
export function guardHooks(hooks: EngineHooks, log: (message: string, err: unknown) => void = (m, e) => console.error(m, e)): EngineHooks {
  const guarded: Record<string, (info: never) => void> = {};
  for (const [name, fn] of Object.entries(hooks) as [string, unknown][]) {
    if (typeof fn !== "function") continue;
    guarded[name] = (info: never) => {
      try {
        const r: unknown = (fn as (i: never) => unknown).call(hooks, info);
        if (r && typeof (r as Promise<unknown>).then === "function") (r as Promise<unknown>).then(undefined, (err: unknown) => log(`edda: hook ${name} failed`, err));
      } catch (err) {
        log(`edda: hook ${name} failed`, err);
      }
    };
  }
  return guarded as EngineHooks;
}
