/** @jsxImportSource hono/jsx */
/**
 * The viewer's "why isn't it moving" (engine/why.ts): a banner on the instance page — the reason,
 * when it moves by itself, what moves it, with links to the instances it waits behind — and a
 * short cell on the list. Stored text in a reason is already bounded by the engine; the cell cuts
 * it shorter still.
 */
import type { WhyReason } from "../../engine/why-view.ts";
import { clip, formatTime, relative } from "./format.ts";

/** The reasons whose `blockedBy` names instances (the others name engines or flow-control keys). */
const BLOCKED_BY_INSTANCES: ReadonlySet<WhyReason["kind"]> = new Set(["child", "concurrency", "rate_limit"]);

const label = (kind: WhyReason["kind"]) => kind.replace("_", " ");

export function WhyBanner({ reason, now }: { reason: WhyReason; now: Date }) {
  const links = BLOCKED_BY_INSTANCES.has(reason.kind);
  const behind = reason.blockedBy ?? [];
  return (
    <section class={`why why-${reason.kind}`} id="why" data-why-kind={reason.kind}>
      <div>
        <span class="badge">{label(reason.kind)}</span> <span id="why-detail">{clip(reason.detail, 1000)}</span>
      </div>
      {reason.until ? (
        <div class="small">
          moves by itself at <strong>{formatTime(new Date(reason.until))}</strong> <span class="muted">({relative(new Date(reason.until), now)})</span>
        </div>
      ) : null}
      {behind.length ? (
        <div class="small" id="why-blocked-by">
          waits behind{" "}
          {behind.map((id, i) => (
            <>
              {i > 0 ? ", " : ""}
              {links ? <a href={`/ui/instances/${encodeURIComponent(id)}`}>{clip(id, 200)}</a> : <code>{clip(id, 200)}</code>}
            </>
          ))}
        </div>
      ) : null}
      <div class="small" id="why-next">
        <strong>next:</strong> {clip(reason.next, 1000)}
      </div>
      {reason.historyBudget ? (
        <div class="small warn" id="why-history-budget" data-history-entries={String(reason.historyBudget.entries)} data-history-fits={String(reason.historyBudget.fitsEntries)}>
          <strong>history size:</strong> {clip(reason.historyBudget.detail, 1000)}
        </div>
      ) : null}
    </section>
  );
}

/** The list's cell: the kind, and the detail cut short (the whole sentence and what moves it on hover). */
export function WhyCell({ reason }: { reason: WhyReason | undefined }) {
  if (!reason) return <span class="muted">—</span>;
  return (
    <span class="small" title={`${clip(reason.detail, 500)} — next: ${clip(reason.next, 500)}`} data-why={reason.kind}>
      <strong>{label(reason.kind)}</strong> <span class="muted">{clip(reason.detail, 80)}</span>
    </span>
  );
}
