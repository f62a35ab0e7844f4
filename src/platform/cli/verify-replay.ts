/**
 * `edda-edge verify-replay <module>`: before a deploy, replay the history of
 * every in-flight instance in DATABASE_URL against the workflows <module>
 * exports (the code about to be deployed) and report which would diverge.
 * Read-only: nothing runs, nothing is written. Exit code 1 when any
 * instance would diverge or its workflow is missing from the module, so a
 * deploy pipeline can stop on it.
 */
import { INSTANCE_STATUSES, TERMINAL_STATUSES, type InstanceStatus } from "../../core/model.ts";
import { verifyReplay } from "../../engine/verify.ts";
import { phase } from "../../engine/decide.ts";
import { sealPayloads } from "../../engine/payload-sealing.ts";
import { encryptionCodec } from "../../core/payload-codec.ts";
import { createPostgresJsDatabase } from "../../storage/drivers/postgres-js.ts";
import { createStorage } from "../../storage/pg-storage.ts";
import { postgresValues } from "../../storage/payload-refs.ts";

import { readConfig } from "../env.ts";
import { DATABASE_URL_OPTIONS, databaseUrl, parseCommand, UsageError, type Io } from "./args.ts";
import { loadWorkflows } from "./dev.ts";

export const VERIFY_REPLAY_USAGE = `usage: edda-edge verify-replay <module> [--database-url <postgres url>] [--workflow <name>] [--limit <n>] [--json]
  Replays the history of every in-flight instance in DATABASE_URL (or --database-url; --url is a
  deprecated alias) against the workflows
  <module> exports and reports which would diverge (they would be parked after the deploy).
  Read-only. Exit code 1 when one would diverge or its workflow is not in <module>.
  --workflow <name>  only instances of this workflow
  --limit <n>        check at most n instances (default 10000)`;

/** Statuses whose next step may replay the workflow (a compensating instance runs compensations only; decide.ts `phase` tells the rest). */
const REPLAYED: InstanceStatus[] = INSTANCE_STATUSES.filter((s) => !TERMINAL_STATUSES.includes(s) && s !== "compensating");

interface Finding {
  instanceId: string;
  workflow: string;
  status: InstanceStatus;
  ok: boolean;
  /** Where the replay stops (ok), or why it diverges. */
  detail: string;
}

export async function verifyReplayCommand(argv: string[], env: Record<string, string | undefined>, io: Io): Promise<number> {
  const { values, positionals, help } = parseCommand(
    argv,
    { ...DATABASE_URL_OPTIONS, workflow: { type: "string" }, limit: { type: "string" }, json: { type: "boolean" } },
    VERIFY_REPLAY_USAGE,
    io,
  );
  if (help) return 0;
  const [module] = positionals;
  if (!module) throw new UsageError("missing the workflows module", VERIFY_REPLAY_USAGE);
  const url = databaseUrl(values, readConfig(env).databaseUrl, io);
  if (!url) throw new UsageError("DATABASE_URL is not set (or pass --database-url)", VERIFY_REPLAY_USAGE);
  const limit = Number(values.limit ?? 10_000);
  if (!Number.isInteger(limit) || limit < 1) throw new UsageError(`--limit must be a positive integer, got ${JSON.stringify(values.limit)}`, VERIFY_REPLAY_USAGE);
  const workflows = new Map((await loadWorkflows(module)).map((w) => [w.workflowName, w]));

  const database = createPostgresJsDatabase({ url, max: 2 });
  // Read as the engine reads: values by reference resolved, sealed ones opened with EDDA_ENCRYPTION_KEY(S) (or refused by name).
  const keys = readConfig(env).encryptionKeys;
  const storage = sealPayloads(createStorage(database), { codec: keys ? encryptionCodec(keys) : null, thresholdBytes: Infinity, store: postgresValues });
  const findings: Finding[] = [];
  try {
    let cursor: string | null = null;
    do {
      const page = await storage.listInstances({ status: REPLAYED, limit: Math.min(500, limit - findings.length), cursor, ...(values.workflow ? { workflowName: values.workflow as string } : {}) });
      for (const listed of page.instances) {
        // A page keeps large values as references: the instance's own read resolves its input.
        const inst = (await storage.getInstance(listed.instanceId)) ?? listed;
        const base = { instanceId: inst.instanceId, workflow: inst.workflowName, status: inst.status };
        const wf = workflows.get(inst.workflowName);
        if (!wf) {
          findings.push({ ...base, ok: false, detail: `workflow "${inst.workflowName}" is not in ${module}` });
          continue;
        }
        const history = await storage.loadHistory(inst.instanceId);
        // Cancelled, or a compensation waiting out its retry backoff: its next step runs compensations, not the body.
        if (phase(inst, history) === "compensating") continue;
        const verdict = await verifyReplay(wf, inst, history);
        findings.push({ ...base, ok: verdict.ok, detail: verdict.ok ? verdict.next : verdict.error });
      }
      cursor = page.nextCursor;
    } while (cursor && findings.length < limit);
  } finally {
    await database.close();
  }

  const diverging = findings.filter((f) => !f.ok);
  if (values.json) {
    io.out(JSON.stringify({ checked: findings.length, diverging: diverging.length, instances: findings }));
  } else {
    for (const f of diverging) io.out(`DIVERGES  ${f.instanceId}  ${f.workflow} (${f.status}): ${f.detail}`);
    io.out(`${findings.length} in-flight instance(s) checked, ${diverging.length} would diverge`);
  }
  return diverging.length ? 1 : 0;
}
