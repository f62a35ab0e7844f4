/**
 * The commands that talk to an app over its HTTP API: `start`,
 * `instances list|show|cancel`, `send`, `publish`. The app's address is
 * --url, else EDDA_URL, else http://127.0.0.1:8787 (`npm start` and
 * `edda-edge dev` on a laptop: no flags needed); `host:port` means http. The
 * bearer token is --token or EDDA_API_TOKEN. A refused request prints the
 * app's problem (status, title, detail, and each validation issue with its
 * path) and exits 1; `--json` prints the response body as it came (the
 * problem too), for scripts.
 */
import { INSTANCE_STATUSES } from "../../core/model.ts";
import { jsonArgument, parseCommand, UsageError, type Io } from "./args.ts";
import { INSTANCES_REPAIR_USAGE, REPAIR_FLAGS, repairInstances, SCHEDULES_USAGE, schedulesCommand } from "./repairs.ts";

/** Where `npm start` and `edda-edge dev` listen by default. */
export const DEFAULT_APP_URL = "http://127.0.0.1:8787";

const CONNECTION = `  --url <url>      the app's base URL or host:port (default EDDA_URL, else ${DEFAULT_APP_URL})
  --token <token>  API bearer token (default EDDA_API_TOKEN)
  --json           print the raw JSON response (a refusal's problem too)`;

const INSTANCES_USAGE = `usage: edda-edge instances list [--workflow <name>] [--status <s,...>] [--deployment <id>] [--tag <key:value>]... [--limit <n>] [--cursor <c>]
  --status: ${INSTANCE_STATUSES.join(", ")} (comma-separated); --tag: repeat for several (all must match); --limit: 1-100
       edda-edge instances show <instanceId> [--history]
       edda-edge instances cancel <instanceId>
${INSTANCES_REPAIR_USAGE}
${CONNECTION}`;

export const REMOTE_USAGES: Record<string, string> = {
  start: `usage: edda-edge start <workflow> [input JSON] [--id <instanceId>]
  Starts an instance. The input is JSON (quote it for the shell: '{"orderId":"o1"}'); a bare word
  such as ada is the string "ada"; anything else that is not JSON is refused. With --id, starting again is a no-op.
${CONNECTION}`,
  instances: INSTANCES_USAGE,
  why: `usage: edda-edge why <instanceId>
  Why the instance is not moving and what will move it, in two lines (GET /instances/:id/why):
  its status and reason, then what moves it. --json prints the reason with its facts.
${CONNECTION}`,
  deployments: `usage: edda-edge deployments
  The deployments that started instances (GET /deployments), most recent first: each with its
  unfinished instances by status; "draining" marks an older one that still has work.
${CONNECTION}`,
  upgrade: `usage: edda-edge upgrade <instanceId>
  Moves an unfinished instance to the deployment answering (POST /instances/:id/upgrade), only when its
  history replays with that deployment's code; else prints the mismatch and exits 1.
  Several at once: edda-edge instances bulk upgrade --deployment <old id>.
${CONNECTION}`,
  schedules: `${SCHEDULES_USAGE}
${CONNECTION}`,
  send: `usage: edda-edge send <instanceId> <channel> [data JSON] [--metadata <JSON object>]
  Sends a point-to-point message to one instance.
${CONNECTION}`,
  publish: `usage: edda-edge publish <channel> [data JSON] [--metadata <JSON object>]
  Publishes a message on a channel (every subscriber, or one competing subscriber, gets it).
${CONNECTION}`,
};

const SHARED = { url: { type: "string" }, token: { type: "string" }, json: { type: "boolean" } } as const;

interface Remote {
  call(method: "GET" | "POST", path: string, body?: unknown): Promise<Record<string, unknown>>;
}

/** A request the app refused (its problem body, for --json) or could not be reached. */
class RemoteError extends Error {
  override name = "RemoteError";
  constructor(
    message: string,
    readonly body?: Record<string, unknown>,
  ) {
    super(message);
  }
}

/** The app's base URL: --url, else EDDA_URL, else the default; `host:port` (no scheme) means http. */
export function appUrl(flag: string | undefined, env: Record<string, string | undefined>, usage: string): { root: URL; from: string } {
  const [raw, from] = flag !== undefined ? [flag, "--url"] : env.EDDA_URL ? [env.EDDA_URL, "EDDA_URL"] : [DEFAULT_APP_URL, "the default app URL"];
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(raw) ? raw : `http://${raw}`;
  let root: URL;
  try {
    root = new URL(withScheme.endsWith("/") ? withScheme : `${withScheme}/`);
  } catch {
    throw new UsageError(`${from} ${JSON.stringify(raw)} is not a URL or host:port`, usage);
  }
  if (root.protocol !== "http:" && root.protocol !== "https:") throw new UsageError(`${from} ${JSON.stringify(raw)} is not an http(s) URL`, usage);
  return { root, from };
}

/** A validation issue's path as a reader writes it: `items[0].sku`; the value itself is `(the value)`. */
export function issuePath(path: unknown): string {
  if (!Array.isArray(path) || path.length === 0) return "(the value)";
  return path.map((p, i) => (typeof p === "number" ? `[${p}]` : i === 0 ? String(p) : `.${String(p)}`)).join("");
}

/** The human lines of a problem: `→ 422 Unprocessable Content: detail (ValidationError)`, then one line per issue. */
function problemLines(method: string, path: string, status: number, json: Record<string, unknown>): string {
  const detail = String(json.detail ?? json.error ?? "");
  const head = `${method} ${path} → ${status}${json.title ? ` ${String(json.title)}` : ""}${detail ? `: ${detail}` : ""}${json.error_type ? ` (${String(json.error_type)})` : ""}`;
  const issues = Array.isArray(json.issues) ? (json.issues as { path?: unknown; message?: unknown }[]) : [];
  return [head, ...issues.slice(0, 20).map((i) => `  ${issuePath(i.path)}: ${String(i.message ?? "invalid")}`), ...(issues.length > 20 ? [`  … ${issues.length - 20} more`] : [])].join("\n");
}

function remote(values: Record<string, unknown>, env: Record<string, string | undefined>, usage: string): Remote {
  const { root, from } = appUrl(values.url as string | undefined, env, usage);
  const token = (values.token as string | undefined) ?? env.EDDA_API_TOKEN;
  return {
    async call(method, path, body) {
      const url = new URL(path.replace(/^\//, ""), root);
      let res: Response;
      let text: string;
      try {
        res = await fetch(url, {
          method,
          headers: { accept: "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body === undefined ? {} : { "content-type": "application/json" }) },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        });
        text = await res.text();
      } catch (err) {
        const cause = (err as Error).cause as { code?: string; message?: string } | undefined;
        const hint = from === "--url" ? "" : ` (${from}; is the app running? set EDDA_URL or pass --url)`;
        throw new RemoteError(`cannot reach ${root.origin}${hint}: ${cause?.code ?? cause?.message ?? (err as Error).message}`);
      }
      let json: Record<string, unknown>;
      try {
        json = JSON.parse(text) as Record<string, unknown>;
      } catch {
        json = { error: text.slice(0, 500) };
      }
      if (!res.ok) throw new RemoteError(problemLines(method, url.pathname, res.status, json), json);
      return json;
    },
  };
}

/** A JSON argument, or a UsageError naming it with the parse error. */
function jsonArg(text: string | undefined, what: string, usage: string): unknown {
  try {
    return jsonArgument(text);
  } catch (err) {
    throw new UsageError(`${what} is not valid JSON: ${(err as Error).message} (a string needs JSON quotes: '"text"')`, usage);
  }
}

/** --status: each comma-separated value one of the statuses; --limit: 1-100. */
function checkListFlags(values: Record<string, unknown>, usage: string): void {
  if (typeof values.status === "string") {
    const bad = values.status.split(",").filter((s) => !(INSTANCE_STATUSES as readonly string[]).includes(s));
    if (bad.length) throw new UsageError(`--status ${JSON.stringify(bad.join(","))} is not a status; valid values: ${INSTANCE_STATUSES.join(", ")}`, usage);
  }
  if (typeof values.limit === "string" && !/^(100|[1-9]\d?)$/.test(values.limit)) throw new UsageError(`--limit must be an integer from 1 to 100, got ${JSON.stringify(values.limit)}`, usage);
}

const metadataOf = (value: unknown, usage: string): Record<string, unknown> | undefined => {
  if (value === undefined) return undefined;
  const m = jsonArg(value as string, "--metadata", usage);
  if (!m || typeof m !== "object" || Array.isArray(m)) throw new UsageError("--metadata must be a JSON object", usage);
  return m as Record<string, unknown>;
};

function needs(positionals: string[], count: number, what: string, usage: string): void {
  if (positionals.length < count) throw new UsageError(`missing ${what}`, usage);
}

export async function remoteCommand(command: string, argv: string[], env: Record<string, string | undefined>, io: Io): Promise<number> {
  const usage = REMOTE_USAGES[command]!;
  const extra =
    command === "instances"
      ? { workflow: { type: "string" }, status: { type: "string" }, tag: { type: "string", multiple: true }, limit: { type: "string" }, cursor: { type: "string" }, history: { type: "boolean" }, ...REPAIR_FLAGS }
      : command === "schedules"
        ? { "request-id": { type: "string" } }
        : command === "start"
          ? { id: { type: "string" } }
          : { metadata: { type: "string" } };
  const { values, positionals, help } = parseCommand(argv, { ...SHARED, ...extra } as never, usage, io);
  if (help) return 0;
  if (command === "instances") checkListFlags(values, usage);
  const api = remote(values, env, usage);
  const print = (json: Record<string, unknown>, human: string) => io.out(values.json ? JSON.stringify(json, null, 2) : human);
  try {
    switch (command) {
      case "start": {
        needs(positionals, 1, "the workflow name", usage);
        const [name, input] = positionals as [string, string | undefined];
        const r = await api.call("POST", `/workflows/${encodeURIComponent(name)}/instances`, { input: jsonArg(input, "the input", usage), ...(values.id ? { instanceId: values.id } : {}) });
        print(r, `${String(r.instanceId)} ${String(r.status)}`);
        return 0;
      }
      case "send": {
        needs(positionals, 2, "the instance id and the channel", usage);
        const [id, channel, data] = positionals as [string, string, string | undefined];
        const metadata = metadataOf(values.metadata, usage);
        const r = await api.call("POST", `/instances/${encodeURIComponent(id)}/messages`, { channel, data: jsonArg(data, "the data", usage), ...(metadata ? { metadata } : {}) });
        print(r, `sent message ${String(r.messageId)} to ${id} on "${channel}"`);
        return 0;
      }
      case "publish": {
        needs(positionals, 1, "the channel", usage);
        const [channel, data] = positionals as [string, string | undefined];
        const metadata = metadataOf(values.metadata, usage);
        const r = await api.call("POST", `/channels/${encodeURIComponent(channel)}/messages`, { data: jsonArg(data, "the data", usage), ...(metadata ? { metadata } : {}) });
        print(r, `published message ${String(r.messageId)} on "${channel}"`);
        return 0;
      }
      case "why": {
        needs(positionals, 1, "the instance id", usage);
        const r = await api.call("GET", `/instances/${encodeURIComponent(positionals[0]!)}/why`);
        print(r, whyLines(r));
        return 0;
      }
      case "upgrade": {
        needs(positionals, 1, "the instance id", usage);
        const r = await api.call("POST", `/instances/${encodeURIComponent(positionals[0]!)}/upgrade`);
        print(r, r.moved ? `${String(r.instanceId)} moved from ${String(r.from ?? "(unrecorded)")} to ${String(r.deployment)}; next: ${String(r.next)}` : `${String(r.instanceId)} is on ${String(r.deployment)} already; next: ${String(r.next)}`);
        return 0;
      }
      case "deployments": {
        const r = await api.call("GET", "/deployments");
        print(r, deploymentLines(r));
        return 0;
      }
      case "schedules":
        return await schedulesCommand(api, positionals, values, print);
      default:
        return (await repairInstances(api, positionals[0], positionals, values, usage, print, (text, what) => jsonArg(text, what, usage))) ?? (await instances(api, values, positionals, usage, print));
    }
  } catch (err) {
    if (err instanceof RemoteError) {
      // --json: the problem as the app sent it, on stdout, for scripts; the human line on stderr always.
      if (values.json && err.body) io.out(JSON.stringify(err.body, null, 2));
      io.err(`edda-edge ${command}: ${err.message}`);
      return 1;
    }
    throw err;
  }
}

type Print = (json: Record<string, unknown>, human: string) => void;

/** `GET /instances/:id/why` in two lines: `<id> <status> — <kind>: <detail>`, then `  next: …` (with what it waits behind); a third when the history nears the CPU budget. */
export function whyLines(view: Record<string, unknown>): string {
  const r = (view.reason ?? {}) as { kind?: unknown; detail?: unknown; next?: unknown; blockedBy?: unknown; historyBudget?: { detail?: unknown } };
  const behind = Array.isArray(r.blockedBy) && r.blockedBy.length ? ` (behind ${r.blockedBy.slice(0, 5).map(String).join(", ")}${r.blockedBy.length > 5 ? ", …" : ""})` : "";
  const budget = r.historyBudget?.detail ? `\n  history size: ${String(r.historyBudget.detail)}` : "";
  return `${String(view.instanceId)} ${String(view.status)} — ${String(r.kind)}: ${String(r.detail)}${behind}\n  next: ${String(r.next)}${budget}`;
}

/** `GET /deployments`, a line each: `<id> [current|draining] since <time>: <n> <status>, …` (or `no unfinished instances`). */
export function deploymentLines(view: Record<string, unknown>): string {
  const list = (Array.isArray(view.deployments) ? view.deployments : []) as { id: string | null; current: boolean; draining: boolean; startedAt: string | null; instances: Record<string, number> }[];
  return list
    .map((d) => {
      const mark = d.current ? " [current]" : d.draining ? " [draining]" : "";
      const counts = Object.entries(d.instances).filter(([, n]) => n > 0);
      const work = counts.length ? counts.map(([s, n]) => `${n} ${s}`).join(", ") : "no unfinished instances";
      return `${d.id ?? "(unrecorded)"}${mark}${d.startedAt ? ` since ${d.startedAt}` : ""}: ${work}`;
    })
    .join("\n");
}

async function instances(api: Remote, values: Record<string, unknown>, positionals: string[], usage: string, print: Print): Promise<number> {
  const [action, id] = positionals;
  if (action === "list") {
    const q = new URLSearchParams();
    for (const k of ["workflow", "status", "deployment", "limit", "cursor"]) if (typeof values[k] === "string") q.set(k, values[k]);
    for (const tag of (values.tag as string[] | undefined) ?? []) {
      if (!tag.includes(":")) throw new UsageError(`--tag "${tag}" is not key:value`, usage);
      q.append("tag", tag);
    }
    const r = await api.call("GET", `/instances${q.size ? `?${q}` : ""}`);
    const rows = (r.instances as { instanceId: string; workflowName: string; status: string; startedAt: string }[]).map(
      (i) => `${i.instanceId}  ${i.workflowName}  ${i.status}  ${i.startedAt}`,
    );
    print(r, [...rows, ...(r.nextCursor ? [`(more: --cursor ${String(r.nextCursor)})`] : [])].join("\n") || "no instances");
    return 0;
  }
  if (action === "show" || action === "cancel") {
    if (!id) throw new UsageError("missing the instance id", usage);
    if (action === "cancel") {
      const r = await api.call("POST", `/instances/${encodeURIComponent(id)}/cancel`);
      print(r, `${id} ${String(r.status)}`);
      return 0;
    }
    const r = await api.call("GET", `/instances/${encodeURIComponent(id)}${values.history ? "?history=true" : ""}`);
    print(r, JSON.stringify(r, null, 2));
    return 0;
  }
  throw new UsageError(action ? `unknown action "${action}"` : "missing the action (list, show, cancel, rerun, fork or bulk)", usage);
}
