/**
 * The commands that talk to a deployed app over its HTTP API: `start`,
 * `instances list|show|cancel`, `send`, `publish`. The app's address and
 * bearer token come from --url/--token or EDDA_URL/EDDA_API_TOKEN. A refused
 * request prints the app's problem response and exits 1; `--json` prints the
 * response body as it came, for scripts.
 */
import { jsonArgument, parseCommand, UsageError, type Io } from "./args.ts";

const CONNECTION = `  --url <url>      the app's base URL (EDDA_URL)
  --token <token>  API bearer token (EDDA_API_TOKEN)
  --json           print the raw JSON response`;

const INSTANCES_USAGE = `usage: edda-edge instances list [--workflow <name>] [--status <s,...>] [--limit <n>] [--cursor <c>]
       edda-edge instances show <instanceId> [--history]
       edda-edge instances cancel <instanceId>
${CONNECTION}`;

export const REMOTE_USAGES: Record<string, string> = {
  start: `usage: edda-edge start <workflow> [input JSON] [--id <instanceId>]
  Starts an instance (input is JSON; a bare word is a string). With --id, starting again is a no-op.
${CONNECTION}`,
  instances: INSTANCES_USAGE,
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

/** A request the app answered with an error: its status and problem body. */
class RemoteError extends Error {
  override name = "RemoteError";
}

function remote(values: Record<string, unknown>, env: Record<string, string | undefined>, usage: string): Remote {
  const base = (values.url as string | undefined) ?? env.EDDA_URL;
  if (!base) throw new UsageError("no app URL: pass --url or set EDDA_URL", usage);
  let root: URL;
  try {
    root = new URL(base.endsWith("/") ? base : `${base}/`);
  } catch {
    throw new UsageError(`--url ${JSON.stringify(base)} is not a URL`, usage);
  }
  const token = (values.token as string | undefined) ?? env.EDDA_API_TOKEN;
  return {
    async call(method, path, body) {
      const url = new URL(path.replace(/^\//, ""), root);
      let res: Response;
      try {
        res = await fetch(url, {
          method,
          headers: { accept: "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body === undefined ? {} : { "content-type": "application/json" }) },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        });
      } catch (err) {
        throw new RemoteError(`cannot reach ${root.origin}: ${(err as Error).cause instanceof Error ? ((err as Error).cause as Error).message : (err as Error).message}`);
      }
      const text = await res.text();
      let json: Record<string, unknown>;
      try {
        json = JSON.parse(text) as Record<string, unknown>;
      } catch {
        json = { error: text.slice(0, 500) };
      }
      if (!res.ok) throw new RemoteError(`${method} ${url.pathname} → ${res.status}: ${String(json.error ?? res.statusText)}${json.error_type ? ` (${String(json.error_type)})` : ""}`);
      return json;
    },
  };
}

const metadataOf = (value: unknown, usage: string): Record<string, unknown> | undefined => {
  if (value === undefined) return undefined;
  const m = jsonArgument(value as string);
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
      ? { workflow: { type: "string" }, status: { type: "string" }, limit: { type: "string" }, cursor: { type: "string" }, history: { type: "boolean" } }
      : command === "start"
        ? { id: { type: "string" } }
        : { metadata: { type: "string" } };
  const { values, positionals, help } = parseCommand(argv, { ...SHARED, ...extra } as never, usage, io);
  if (help) return 0;
  const api = remote(values, env, usage);
  const print = (json: Record<string, unknown>, human: string) => io.out(values.json ? JSON.stringify(json, null, 2) : human);
  try {
    switch (command) {
      case "start": {
        needs(positionals, 1, "the workflow name", usage);
        const [name, input] = positionals as [string, string | undefined];
        const r = await api.call("POST", `/workflows/${encodeURIComponent(name)}/instances`, { input: jsonArgument(input), ...(values.id ? { instanceId: values.id } : {}) });
        print(r, `${String(r.instanceId)} ${String(r.status)}`);
        return 0;
      }
      case "send": {
        needs(positionals, 2, "the instance id and the channel", usage);
        const [id, channel, data] = positionals as [string, string, string | undefined];
        const metadata = metadataOf(values.metadata, usage);
        const r = await api.call("POST", `/instances/${encodeURIComponent(id)}/messages`, { channel, data: jsonArgument(data), ...(metadata ? { metadata } : {}) });
        print(r, `sent message ${String(r.messageId)} to ${id} on "${channel}"`);
        return 0;
      }
      case "publish": {
        needs(positionals, 1, "the channel", usage);
        const [channel, data] = positionals as [string, string | undefined];
        const metadata = metadataOf(values.metadata, usage);
        const r = await api.call("POST", `/channels/${encodeURIComponent(channel)}/messages`, { data: jsonArgument(data), ...(metadata ? { metadata } : {}) });
        print(r, `published message ${String(r.messageId)} on "${channel}"`);
        return 0;
      }
      default:
        return await instances(api, values, positionals, usage, print);
    }
  } catch (err) {
    if (err instanceof RemoteError) {
      io.err(`edda-edge ${command}: ${err.message}`);
      return 1;
    }
    throw err;
  }
}

type Print = (json: Record<string, unknown>, human: string) => void;

async function instances(api: Remote, values: Record<string, unknown>, positionals: string[], usage: string, print: Print): Promise<number> {
  const [action, id] = positionals;
  if (action === "list") {
    const q = new URLSearchParams();
    for (const k of ["workflow", "status", "limit", "cursor"]) if (typeof values[k] === "string") q.set(k, values[k]);
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
  throw new UsageError(action ? `unknown action "${action}"` : "missing the action (list, show or cancel)", usage);
}
