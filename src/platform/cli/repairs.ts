/**
 * The repair commands over the app's HTTP API: `instances rerun|fork|bulk`
 * and `schedules list|pause|resume|trigger` (remote.ts runs them, with its
 * connection flags and problem printing).
 */
import { INSTANCE_STATUSES } from "../../core/model.ts";
import { UsageError } from "./args.ts";

export const INSTANCES_REPAIR_USAGE = `       edda-edge instances rerun <instanceId> [--input <JSON>] [--request-id <id>]
       edda-edge instances fork <instanceId> <fromActivityId> [--request-id <id>]
       edda-edge instances bulk cancel|resume|rerun|upgrade [--workflow <name>] [--status <s,...>] [--search <text>] [--deployment <id>] [--dry-run] [--request-id <id>]
  rerun: a new instance of a finished one, its input or --input; fork: from the history before an activity (e.g. ship_order:1);
  bulk: a durable operation over every matching instance (--dry-run: only the count); --request-id makes a retry a no-op`;

export const SCHEDULES_USAGE = `usage: edda-edge schedules list
       edda-edge schedules pause|resume <workflow>
       edda-edge schedules trigger <workflow> [--request-id <id>]
  pause: no tick starts until resume (which starts from the next tick after now); trigger: one instance now`;

export const REPAIR_FLAGS = { input: { type: "string" }, "request-id": { type: "string" }, search: { type: "string" }, deployment: { type: "string" }, "dry-run": { type: "boolean" } } as const;

interface Api {
  call(method: "GET" | "POST", path: string, body?: unknown): Promise<Record<string, unknown>>;
}
type Print = (json: Record<string, unknown>, human: string) => void;

const enc = encodeURIComponent;
const requestIdOf = (values: Record<string, unknown>) => (typeof values["request-id"] === "string" ? { requestId: values["request-id"] } : {});

/** `instances rerun|fork|bulk`; null when `action` is not one of them. */
export async function repairInstances(api: Api, action: string | undefined, positionals: string[], values: Record<string, unknown>, usage: string, print: Print, json: (text: string, what: string) => unknown): Promise<number | null> {
  const [, id, from] = positionals;
  if (action === "rerun") {
    if (!id) throw new UsageError("missing the instance id", usage);
    const r = await api.call("POST", `/instances/${enc(id)}/rerun`, { ...(typeof values.input === "string" ? { input: json(values.input, "--input") } : {}), ...requestIdOf(values) });
    print(r, `${String(r.instanceId)} ${String(r.status)} (rerun of ${id})`);
    return 0;
  }
  if (action === "fork") {
    if (!id || !from) throw new UsageError("missing the instance id and the activity id to fork from", usage);
    const r = await api.call("POST", `/instances/${enc(id)}/fork`, { fromActivityId: from, ...requestIdOf(values) });
    print(r, `${String(r.instanceId)} ${String(r.status)} (fork of ${id} from ${from}, ${String(r.copiedEvents)} events reused)`);
    return 0;
  }
  if (action === "bulk") {
    const what = id;
    if (what !== "cancel" && what !== "resume" && what !== "rerun" && what !== "upgrade") throw new UsageError("bulk needs an action: cancel, resume, rerun or upgrade", usage);
    const status = typeof values.status === "string" ? values.status.split(",").filter(Boolean) : undefined;
    if (status?.some((s) => !(INSTANCE_STATUSES as readonly string[]).includes(s))) throw new UsageError(`--status takes ${INSTANCE_STATUSES.join(", ")}`, usage);
    const filter = { ...(typeof values.workflow === "string" ? { workflow: values.workflow } : {}), ...(status ? { status } : {}), ...(typeof values.search === "string" ? { search: values.search } : {}), ...(typeof values.deployment === "string" ? { deployment: values.deployment } : {}) };
    const r = await api.call("POST", "/instances/bulk", { filter, action: what, ...(values["dry-run"] ? { dryRun: true } : {}), ...requestIdOf(values) });
    print(r, values["dry-run"] ? `${String(r.count)} instances match` : `operation ${String(r.operationId)}: ${what} ${String(r.total)} instances (progress: GET /operations/${String(r.operationId)})`);
    return 0;
  }
  return null;
}

export async function schedulesCommand(api: Api, positionals: string[], values: Record<string, unknown>, print: Print): Promise<number> {
  const [action, workflow] = positionals;
  if (action === "list" || action === undefined) {
    const r = await api.call("GET", "/schedules");
    const rows = (r.schedules as { workflow: string; cron: string; nextRunAt: string | null; pausedAt: string | null }[]).map((s) => `${s.workflow}  ${s.cron}  ${s.pausedAt ? `paused since ${s.pausedAt}` : `next ${s.nextRunAt ?? "never"}`}`);
    print(r, rows.join("\n") || "no schedules");
    return 0;
  }
  if (action !== "pause" && action !== "resume" && action !== "trigger") throw new UsageError(`unknown action "${action}"`, SCHEDULES_USAGE);
  if (!workflow) throw new UsageError("missing the workflow name", SCHEDULES_USAGE);
  const r = await api.call("POST", `/schedules/${enc(workflow)}/${action}`, action === "trigger" ? requestIdOf(values) : {});
  print(r, action === "trigger" ? `${String(r.instanceId)} ${String(r.status)}` : `${workflow} ${r.pausedAt ? `paused since ${String(r.pausedAt)}` : `ticking, next ${String(r.nextRunAt ?? "never")}`}`);
  return 0;
}
