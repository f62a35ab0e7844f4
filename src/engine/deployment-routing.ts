/**
 * Where a follow-up for an instance goes on the edge platforms, so that it reaches the code of the
 * instance's deployment while that code is still served (engine/versioning.ts has the policy; the
 * storage predicate keeps any other code from running it either way). Pure: the platform adapters
 * and dispatchers call these; docs/design.md cites the platforms' documentation they follow.
 *
 * - Workers: during a gradual deployment two versions serve the Worker; a request carrying
 *   `Cloudflare-Workers-Version-Overrides: <worker>="<version id>"` (an RFC 8941 dictionary whose
 *   value is a String) runs on that version when it is in the current deployment, and is routed by
 *   the deployment's percentages otherwise.
 * - Deno Deploy: every revision (Classic: deployment) keeps a URL of its own —
 *   `https://<app>-<revision>.<org>.deno.net` (Classic: `https://<project>-<deployment>.deno.dev`).
 */

export const VERSION_OVERRIDES_HEADER = "Cloudflare-Workers-Version-Overrides";

/** An RFC 8941 key: lower-case letter or `*`, then lower-case letters, digits, `_ - . *`. */
const SF_KEY = /^[a-z*][a-z0-9_\-.*]*$/;

/** RFC 8941 sf-string: printable ASCII (0x20–0x7E), `\` and `"` escaped. */
function sfString(value: string): string {
  for (const ch of value) {
    const c = ch.charCodeAt(0);
    if (c < 0x20 || c > 0x7e) throw new TypeError(`a structured-field string holds printable ASCII only (got U+${c.toString(16).padStart(4, "0")})`);
  }
  return `"${value.replace(/[\\"]/g, (m) => `\\${m}`)}"`;
}

/** The version-overrides header's value that sends a request to `versionId` of Worker `workerName`. */
export function versionOverride(workerName: string, versionId: string): string {
  if (!SF_KEY.test(workerName)) throw new TypeError(`Worker name "${workerName}" is not a structured-field key (lower-case letters, digits, _ - . *)`);
  if (versionId === "") throw new TypeError("a version id is required");
  return `${workerName}=${sfString(versionId)}`;
}

/**
 * The headers a Worker's follow-up for an instance carries: pinned to the version of the instance's
 * deployment when that deployment is a Worker version (a deployment id set by EDDA_DEPLOYMENT is not
 * addressable: nothing is added, the percentages route it, and the storage predicate decides).
 */
export function workersFollowUpHeaders(workerName: string | undefined, instanceDeployment: string | null, isVersionId: (d: string) => boolean): Record<string, string> {
  if (!workerName || instanceDeployment === null || !isVersionId(instanceDeployment)) return {};
  return { [VERSION_OVERRIDES_HEADER]: versionOverride(workerName, instanceDeployment) };
}

/** A Worker version id is a UUID (what the version metadata binding's `id` is). */
export const isWorkerVersionId = (d: string): boolean => /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(d);

/** A DNS label: letters, digits, inner hyphens, at most 63. */
const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/i;

/**
 * The URL of one Deno Deploy revision (its preview URL): `https://<app>-<revision>.<org>.deno.net`;
 * without `org`, Deploy Classic's `https://<project>-<deployment>.deno.dev`.
 */
export function denoDeploymentUrl(app: string, revisionId: string, org?: string): URL {
  const label = `${app}-${revisionId}`;
  if (!LABEL.test(app) || !/^[a-z0-9]+$/i.test(revisionId) || !LABEL.test(label)) throw new TypeError(`"${label}" is not a host label of a Deno Deploy revision URL`);
  if (org !== undefined && !LABEL.test(org)) throw new TypeError(`"${org}" is not an organisation's host label`);
  return new URL(org === undefined ? `https://${label}.deno.dev/` : `https://${label}.${org}.deno.net/`);
}

/**
 * Where a Deno follow-up for an instance goes: the app's own URL when the instance is on this
 * deployment (or on none), else its deployment's revision URL — while the revision exists; a
 * deleted one answers nothing and the instance waits (why = pinned) for an upgrade.
 */
export function denoFollowUpBase(publicUrl: URL, current: string, instanceDeployment: string | null, app: string | undefined, org?: string): URL {
  if (instanceDeployment === null || instanceDeployment === current || !app) return publicUrl;
  return denoDeploymentUrl(app, instanceDeployment, org);
}

/** What a queue consumer does with a step message for an instance (the message itself carries no code). */
export type QueueStepRoute = { kind: "run" } | { kind: "hand_on"; headers: Record<string, string> } | { kind: "leave" };

/**
 * A queue consumer on one version receives steps of any version's instances (a queue has one consumer
 * script, whichever version serves it). It runs those its deployment may run; one on an addressable
 * version it hands on — a follow-up fetch carrying the version override, so that version runs it —
 * and any other it leaves to its own deployment's sweep (acked: the instance stays runnable and unleased).
 */
export function queueStepRoute(mayRunHere: boolean, workerName: string | undefined, instanceDeployment: string | null): QueueStepRoute {
  if (mayRunHere) return { kind: "run" };
  const headers = workersFollowUpHeaders(workerName, instanceDeployment, isWorkerVersionId);
  return Object.keys(headers).length ? { kind: "hand_on", headers } : { kind: "leave" };
}
