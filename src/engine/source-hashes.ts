/**
 * Workflow definitions by source hash. A definition is written once per
 * process per workflow (the first start, step or sweep that needs its hash),
 * outside any transaction: a transaction that creates instances must not wait
 * on a definition write from another connection (PGlite has only one).
 */
import type { Workflow } from "../core/definitions.ts";
import { sha256Hex } from "../core/signature.ts";
import type { Storage } from "../storage/types.ts";
import type { DefinitionRecorder } from "./deps.ts";

export class SourceHashes implements DefinitionRecorder {
  private readonly recorded = new Map<string, Promise<string>>();

  constructor(private readonly storage: Pick<Storage, "upsertWorkflowDefinition">) {}

  /** The source hash of the deployed code of `wf`, its definition recorded on first use. */
  hash(wf: Workflow): Promise<string> {
    let p = this.recorded.get(wf.workflowName);
    if (!p) {
      p = (async () => {
        const hash = await sourceHash(wf);
        await this.storage.upsertWorkflowDefinition(wf.workflowName, hash, wf.source);
        return hash;
      })();
      p.catch(() => this.recorded.delete(wf.workflowName));
      this.recorded.set(wf.workflowName, p);
    }
    return p;
  }

  /** Record these workflows' definitions now (before a transaction that starts instances of them). */
  async ensure(workflows: Iterable<Workflow>): Promise<void> {
    for (const wf of new Set(workflows)) await this.hash(wf);
  }
}

/** A workflow's source hash, computed once per process (engines may be built per request). */
const sourceHashes = new WeakMap<Workflow, Promise<string>>();
export function sourceHash(wf: Workflow): Promise<string> {
  let h = sourceHashes.get(wf);
  if (!h) sourceHashes.set(wf, (h = sha256Hex(wf.source)));
  return h;
}
