/**
 * Lifecycle hooks (observability). They run after the commit that made the
 * event true, so a hook never reports something that was rolled back; a hook
 * that throws is logged and ignored. Activity hooks fire on every attempt,
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
