/**
 * Which deployment this engine is: every instance records the one that
 * started it (`GET /deployments` groups by it, the instance view shows it).
 *
 * In order: the `deployment` option (`EDDA_DEPLOYMENT`); else the platform's
 * own version id, which the adapters pass as that option when the user set
 * none (a Worker's version metadata binding, Deno Deploy's deployment id);
 * else the code itself — `code:` and a hash of the registered workflows'
 * source hashes, so two processes running the same workflows agree, and a
 * deploy that changes a workflow is a new deployment.
 */
import type { Workflow } from "../core/definitions.ts";
import type { InstanceStatus } from "../core/model.ts";
import type { DeploymentSummary } from "../storage/types.ts";
import { sourceHash } from "./source-hashes.ts";

/** The longest deployment id stored (the column's width). */
export const DEPLOYMENT_ID_MAX = 255;

const byCode = new WeakMap<readonly Workflow[], Promise<string>>();

/** `code:` + the first 16 hex digits of SHA-256 over `name=hash` of each workflow, sorted. */
function codeDeployment(workflows: readonly Workflow[]): Promise<string> {
  let p = byCode.get(workflows);
  if (!p) {
    p = (async () => {
      const lines = await Promise.all(workflows.map(async (wf) => `${wf.workflowName}=${await sourceHash(wf)}`));
      const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(lines.sort().join("\n")));
      return `code:${Array.from(new Uint8Array(digest).slice(0, 8), (b) => b.toString(16).padStart(2, "0")).join("")}`;
    })();
    byCode.set(workflows, p);
  }
  return p;
}

/** The deployment id of an engine over `workflows`: `explicit` when given (checked), else its code's. */
export function deploymentOf(explicit: string | undefined, workflows: readonly Workflow[]): () => Promise<string> {
  if (explicit !== undefined) {
    const id = explicit.trim();
    if (id === "" || id.length > DEPLOYMENT_ID_MAX || [...id].some((ch) => ch.charCodeAt(0) < 0x20)) {
      throw new TypeError(`deployment (EDDA_DEPLOYMENT) must be 1–${DEPLOYMENT_ID_MAX} printable characters`);
    }
    return () => Promise.resolve(id);
  }
  return () => codeDeployment(workflows);
}

/** One deployment in `GET /deployments`. */
export interface DeploymentView {
  /** Null: instances started before deployments were recorded. */
  id: string | null;
  /** The deployment answering this request. */
  current: boolean;
  /** When its oldest stored instance started (null: none yet, the current deployment before its first start). */
  startedAt: string | null;
  /** Its unfinished instances by status. */
  instances: Partial<Record<InstanceStatus, number>>;
  /** Not current and still has unfinished instances: it is draining. */
  draining: boolean;
}

export interface DeploymentsView {
  /** The deployment answering. */
  current: string;
  /** Most recently started first; the current one even before its first instance. */
  deployments: DeploymentView[];
}

/** The deployments view: the stored ones, most recent first, and the current one even before its first instance. */
export function deploymentsView(current: string, stored: readonly DeploymentSummary[]): DeploymentsView {
  const deployments: DeploymentView[] = stored.map((d) => ({
    id: d.deployment,
    current: d.deployment === current,
    startedAt: d.startedAt.toISOString(),
    instances: d.unfinished,
    draining: d.deployment !== current && Object.values(d.unfinished).some((n) => (n ?? 0) > 0),
  }));
  if (!deployments.some((d) => d.current)) deployments.unshift({ id: current, current: true, startedAt: null, instances: {}, draining: false });
  return { current, deployments };
}
