/** @jsxImportSource hono/jsx */
/**
 * The page shell: one inline stylesheet (light and dark through
 * `prefers-color-scheme`, one column on a phone) and one tiny inline script
 * for live refresh. Both carry the response's CSP nonce; nothing else may run.
 *
 * Live refresh is progressive enhancement: without JavaScript every page is
 * complete and the "auto-refresh" link reloads it with a meta refresh. With
 * JavaScript the script re-fetches the page (every 2 s, less often for a large
 * or slow page: refreshDelayMs) and swaps the regions
 * marked `data-live` — never one that holds the focus or a field the user has
 * typed into — and stops once the page says it is final.
 */
import type { Child } from "hono/jsx";
import { raw } from "hono/html";
import { WAIT_STATUSES } from "../../core/model.ts";

/** Every waiting status is drawn alike (one per wait kind, core/model.ts), and so is the "waiting" badge (`s-waiting`). */
const WAITING_CLASSES = ["waiting", ...WAIT_STATUSES].map((s) => `.s-${s}`).join(",");

const CSS = `
:root{color-scheme:light dark;--bg:#fafafa;--fg:#1d2125;--muted:#65707b;--card:#fff;--line:#e2e5e9;--accent:#2f5fd0;--ok:#1d7a3e;--bad:#c0362c;--warn:#a05a00;--wait:#6b4fbb;--code:#f3f4f6}
@media (prefers-color-scheme:dark){:root{--bg:#14171a;--fg:#e6e8ea;--muted:#9aa4ae;--card:#1c2024;--line:#2e343a;--accent:#7ea6ff;--ok:#5cc98a;--bad:#ff7b70;--warn:#f0a94b;--wait:#b69cff;--code:#23282d}}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;background:var(--bg);color:var(--fg)}
a{color:var(--accent);text-decoration:none}a:hover{text-decoration:underline}
header.top{display:flex;flex-wrap:wrap;gap:.25rem 1rem;align-items:center;padding:.6rem 1rem;border-bottom:1px solid var(--line);background:var(--card)}
header.top .brand{font-weight:700;color:var(--fg)}
header.top nav{display:flex;gap:.9rem;flex-wrap:wrap}
header.top .right{margin-left:auto;display:flex;gap:.8rem;align-items:center;color:var(--muted);font-size:13px}
main{max-width:1200px;margin:0 auto;padding:1rem}
h1{font-size:1.35rem;margin:.2rem 0 .8rem;word-break:break-all}h2{font-size:1.05rem;margin:1.4rem 0 .5rem}
.card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:.8rem 1rem;margin-bottom:1rem;overflow-x:auto}
.card>h2:first-child{margin-top:0}
table{width:100%;border-collapse:collapse}th,td{text-align:left;padding:.4rem .5rem;border-bottom:1px solid var(--line);vertical-align:top}
th{font-weight:600;color:var(--muted);font-size:12px;text-transform:uppercase;letter-spacing:.03em}
td.id,code,pre,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
td.id{word-break:break-all}
pre{background:var(--code);padding:.6rem;border-radius:6px;overflow:auto;max-height:24rem;margin:.3rem 0;white-space:pre-wrap;word-break:break-word}
.muted{color:var(--muted)}.small{font-size:12px}
.badge{display:inline-block;padding:.05rem .5rem;border-radius:999px;font-size:12px;font-weight:600;border:1px solid currentColor;white-space:nowrap}
.s-completed,.k-activity,.k-compensation{color:var(--ok)}.s-failed,.s-cancelled,.s-quarantined,.k-failed,.k-attempt,.k-timeout,.k-compensation-failed{color:var(--bad)}
.s-running{color:var(--accent)}.s-compensating,.s-parked,.s-paused,.s-queued,.k-retry{color:var(--warn)}.s-invalid,.s-expired{color:var(--bad)}${WAITING_CLASSES},.k-timer,.k-message{color:var(--wait)}
.counts{display:flex;flex-wrap:wrap;gap:.5rem;margin-bottom:.8rem}
.counts a{border:1px solid var(--line);border-radius:6px;padding:.3rem .6rem;background:var(--card);color:var(--fg)}
.counts a.on{border-color:var(--accent);box-shadow:inset 0 0 0 1px var(--accent)}
.counts b{display:block;font-size:1.1rem}
form.filters{display:flex;flex-wrap:wrap;gap:.5rem;align-items:end;margin-bottom:.8rem}
label{display:flex;flex-direction:column;gap:.2rem;font-size:12px;color:var(--muted)}
label.check{flex-direction:row;align-items:center;gap:.4rem;color:var(--fg);font-size:14px}
input,select,textarea,button{font:inherit;color:var(--fg);background:var(--card);border:1px solid var(--line);border-radius:6px;padding:.35rem .5rem}
textarea{width:100%;min-height:5rem;font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12.5px}
button{cursor:pointer;background:var(--accent);border-color:var(--accent);color:#fff;font-weight:600}
button.secondary{background:var(--card);color:var(--fg);border-color:var(--line)}
button.danger{background:var(--bad);border-color:var(--bad)}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(280px,1fr));gap:1rem}
dl.kv{display:grid;grid-template-columns:max-content 1fr;gap:.25rem .8rem;margin:0}dl.kv dt{color:var(--muted)}dl.kv dd{margin:0;word-break:break-all}
.form-grid{display:grid;gap:.7rem;max-width:640px}
.notice{border-left:4px solid var(--ok);padding:.5rem .8rem;background:var(--card);margin-bottom:1rem}
.problem{border-left:4px solid var(--bad);padding:.5rem .8rem;background:var(--card);margin-bottom:1rem}
.why{border-left:4px solid var(--wait);padding:.5rem .8rem;background:var(--card);margin-bottom:1rem;display:grid;gap:.2rem}.why .badge{color:var(--wait)}
#why-history-budget{color:var(--warn)}.why-running{border-color:var(--accent)}.why-running .badge{color:var(--accent)}.why-none{border-color:var(--ok)}.why-none .badge{color:var(--ok)}
.why-concurrency,.why-rate_limit,.why-debounce,.why-retry_backoff,.why-dispatch_pending{border-color:var(--warn)}.why-concurrency .badge,.why-rate_limit .badge,.why-debounce .badge,.why-retry_backoff .badge,.why-dispatch_pending .badge{color:var(--warn)}
.why-leased,.why-pinned,.why-parked,.why-quarantined{border-color:var(--bad)}.why-leased .badge,.why-pinned .badge,.why-parked .badge,.why-quarantined .badge{color:var(--bad)}
.problem ul{margin:.3rem 0 0;padding-left:1.2rem}
ol.timeline{list-style:none;margin:0;padding:0}
ol.timeline li{display:grid;grid-template-columns:10.5rem 5.5rem 1fr;gap:.5rem;padding:.45rem 0;border-bottom:1px solid var(--line)}
ol.timeline li.bad{background:color-mix(in srgb,var(--bad) 6%,transparent)}
ol.timeline li.now{background:color-mix(in srgb,var(--wait) 8%,transparent)}
ol.timeline details{margin-top:.2rem}
.actions{display:flex;flex-wrap:wrap;gap:.6rem;align-items:flex-start}
form.inline{display:inline-block;margin:.2rem 0 0}
.pager{display:flex;gap:1rem;margin-top:.8rem}
@media (max-width:700px){main{padding:.6rem}table.instances th:nth-child(4),table.instances td:nth-child(4),table.instances th:nth-child(5),table.instances td:nth-child(5){display:none}
ol.timeline li{grid-template-columns:1fr;gap:.1rem}header.top .right{margin-left:0}}
`;

/**
 * The wait before the next live refresh: 2 s for an ordinary page, longer
 * for a large or slow one (a tenth of a second per 10 KB, ten times the time
 * the last fetch took), at most a minute — a big instance page is refreshed
 * rarely, not every 2 s by every open tab. Pure, and sent to the browser as
 * its source text.
 */
export function refreshDelayMs(bytes: number, elapsedMs: number): number {
  return Math.min(60_000, Math.max(2000, Math.round(bytes / 100), Math.round(elapsedMs * 10)));
}

/** Re-fetch the page, swap `data-live` regions, stop when `data-final` appears; the next fetch waits refreshDelayMs. */
/**
 * The instance page's live stream: an EventSource on the viewer's own SSE
 * route (the session cookie goes with it), each item one line, at most
 * STREAM_LINES kept; it stops at the end event. Outside the `data-live`
 * regions, so a page refresh never cuts it.
 */
export const STREAM_LINES = 500;
const STREAM_JS = `(()=>{const box=document.querySelector("[data-stream]");if(!box||!window.EventSource)return;
const log=box.querySelector("pre");const state=box.querySelector("[data-stream-state]");const es=new EventSource(box.dataset.stream);
const add=(t)=>{log.append(t+"\\n");while(log.childNodes.length>${STREAM_LINES})log.firstChild.remove();box.hidden=false;};
const item=(e)=>{try{const d=JSON.parse(e.data);const v=d.encoding==="base64"?"<"+d.data.length+" base64 chars>":typeof d.data==="string"?d.data:JSON.stringify(d.data);
add("#"+d.seq+" "+e.type+(d.topic?" ["+d.topic+"]":"")+(e.type==="retry"?" attempt "+d.attempt+" of "+d.source:"")+": "+String(v).slice(0,300));}catch{}};
for(const k of ["chunk","emit","retry"])es.addEventListener(k,item);
es.addEventListener("end",(e)=>{es.close();try{state.textContent="ended: "+JSON.parse(e.data).status;}catch{}});
es.onopen=()=>{state.textContent="live";};})();`;

const LIVE_JS = `(()=>{const box=document.getElementById("live");if(!box)return;const key="edda-live";
const delayOf=${refreshDelayMs.toString()};
box.checked=localStorage.getItem(key)!=="off";let wait=delayOf(document.documentElement.outerHTML.length,0);
const final=()=>document.querySelector("[data-final]")!==null;
box.addEventListener("change",()=>localStorage.setItem(key,box.checked?"on":"off"));
const tick=async()=>{if(final())return;if(box.checked&&!document.hidden){const t0=performance.now();
try{const r=await fetch(location.href,{credentials:"same-origin",headers:{"x-edda-live":"1"}});
if(r.ok&&!r.redirected){const text=await r.text();wait=delayOf(text.length,performance.now()-t0);const doc=new DOMParser().parseFromString(text,"text/html");
for(const el of document.querySelectorAll("[data-live]")){const next=doc.querySelector('[data-live="'+el.dataset.live+'"]');
const typed=[...el.querySelectorAll("input,textarea")].some((i)=>i.value!==i.defaultValue);
if(next&&!typed&&!el.contains(document.activeElement))el.replaceWith(document.importNode(next,true));}}}catch(e){}}
setTimeout(tick,wait);};setTimeout(tick,wait);})();`;

export interface PageProps {
  title: string;
  nonce: string;
  /** Show the logout button (a token is configured). */
  auth: boolean;
  /** Meta refresh (no-JS auto-refresh), seconds. */
  refresh?: number | undefined;
  /** No navigation (the login page). */
  bare?: boolean;
  /**
   * A live-refresh fetch: the script parses the page into a document that
   * inherits this page's CSP, where a new nonce would not match — so the
   * response leaves the style and script out (the regions are all it needs).
   */
  fragment?: boolean;
  children?: Child;
}

export function Page(p: PageProps) {
  return (
    <>
      {raw("<!doctype html>")}
      <html lang="en">
        <head>
          <meta charset="utf-8" />
          <meta name="viewport" content="width=device-width, initial-scale=1" />
          <meta name="referrer" content="same-origin" />
          <link rel="icon" href="data:," />
          {p.refresh ? <meta http-equiv="refresh" content={String(p.refresh)} /> : null}
          <title>{`${p.title} · Edda Edge`}</title>
          {p.fragment ? null : <style nonce={p.nonce} dangerouslySetInnerHTML={{ __html: CSS }} />}
        </head>
        <body>
          <header class="top">
            <a class="brand" href="/ui">
              Edda Edge
            </a>
            {p.bare ? null : (
              <nav>
                <a href="/ui">Instances</a>
                <a href="/ui/workflows">Start</a>
                <a href="/ui/channels">Channels</a>
                <a href="/ui/schedules">Schedules</a>
                <a href="/ui/outbox">Outbox</a>
                <a href="/ui/operations">Operations</a>
                <a href="/ui/events">Events</a>
              </nav>
            )}
            <div class="right">
              {p.bare ? null : (
                <>
                  <label class="check small">
                    <input type="checkbox" id="live" /> live
                  </label>
                  <noscript>
                    <a href="?refresh=5">auto-refresh</a>
                  </noscript>
                </>
              )}
              {p.auth ? (
                <form method="post" action="/ui/logout">
                  <button class="secondary" type="submit">
                    Log out
                  </button>
                </form>
              ) : null}
            </div>
          </header>
          <main>{p.children}</main>
          {p.fragment || p.bare ? null : <script nonce={p.nonce} dangerouslySetInnerHTML={{ __html: LIVE_JS + STREAM_JS }} />}
        </body>
      </html>
    </>
  );
}

export function StatusBadge({ status }: { status: string }) {
  return <span class={`badge s-${status}`}>{status.replace(/_/g, " ")}</span>;
}

export function Problem({ message, issues }: { message: string; issues?: { path?: PropertyKey[]; message: string }[] | undefined }) {
  return (
    <div class="problem" role="alert">
      <strong>{message}</strong>
      {issues?.length ? (
        <ul>
          {issues.map((i) => (
            <li>
              {i.path?.length ? <code>{i.path.map(String).join(".")}</code> : null} {i.message}
            </li>
          ))}
        </ul>
      ) : null}
    </div>
  );
}
