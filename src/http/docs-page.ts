/**
 * The `/docs` page: one HTML document with inline CSS and script (no CDN, no
 * build). It reads `/openapi.json` and renders each operation with a form
 * that sends the request from the browser. The token, when one is needed, is
 * kept in the page's memory only (never in the URL or storage).
 */
export const DOCS_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Edda Edge API reference</title>
<style>
:root { color-scheme: light dark; --fg:#1d1f23; --bg:#fff; --muted:#667; --line:#dde; --code:#f4f5f7; --accent:#3451b2; }
@media (prefers-color-scheme: dark) { :root { --fg:#e6e6e6; --bg:#16181d; --muted:#99a; --line:#2c2f36; --code:#20232a; --accent:#8ea6ff; } }
body { font: 15px/1.5 system-ui, sans-serif; color: var(--fg); background: var(--bg); margin: 0 auto; max-width: 60rem; padding: 1rem; }
h1 { font-size: 1.4rem; } h2 { font-size: 1.1rem; margin-top: 2rem; border-bottom: 1px solid var(--line); }
details.op { border: 1px solid var(--line); border-radius: 6px; margin: .5rem 0; }
details.op > summary { cursor: pointer; padding: .5rem .75rem; display: flex; gap: .75rem; align-items: baseline; flex-wrap: wrap; }
.m { font: 600 .8rem ui-monospace, monospace; text-transform: uppercase; min-width: 3.5rem; color: var(--accent); }
.p { font-family: ui-monospace, monospace; } .s { color: var(--muted); }
.body { padding: 0 .75rem .75rem; }
pre, textarea, input { font: 13px ui-monospace, monospace; background: var(--code); color: var(--fg); border: 1px solid var(--line); border-radius: 4px; }
pre { padding: .5rem; overflow: auto; max-height: 24rem; } textarea { width: 100%; min-height: 8rem; box-sizing: border-box; }
input { padding: .25rem; } label { display: block; margin: .25rem 0; }
button { font: inherit; padding: .25rem .75rem; cursor: pointer; }
#auth { display: none; margin: 1rem 0; }
</style>
</head>
<body>
<h1>Edda Edge API reference</h1>
<p class="s">Generated from the routes' own schemas: <a href="openapi.json">openapi.json</a> (OpenAPI 3.1).</p>
<form id="auth"><label>API token <input id="token" type="password" autocomplete="off" size="40"></label> <button>Load</button> <span id="autherr" class="s"></span></form>
<div id="ops">Loading…</div>
<script>
"use strict";
let token = "";
const el = (tag, attrs = {}, ...kids) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) k === "text" ? (e.textContent = v) : e.setAttribute(k, v);
  for (const k of kids) e.append(k);
  return e;
};
const headers = (extra = {}) => (token ? { ...extra, authorization: "Bearer " + token } : extra);
function example(s, depth = 0) {
  if (!s || depth > 6) return null;
  if (s.examples && s.examples.length) return s.examples[0];
  if (s.default !== undefined) return s.default;
  if (s.enum) return s.enum[0];
  if (s.const !== undefined) return s.const;
  if (s.anyOf || s.oneOf) return example((s.anyOf || s.oneOf)[0], depth + 1);
  const t = Array.isArray(s.type) ? s.type[0] : s.type;
  if (t === "object" || s.properties) {
    const o = {};
    for (const [k, v] of Object.entries(s.properties || {})) if ((s.required || []).includes(k) || depth === 0) o[k] = example(v, depth + 1);
    return o;
  }
  if (t === "array") return [example(s.items, depth + 1)];
  if (t === "string") return s.format === "date-time" ? new Date().toISOString() : "string";
  if (t === "integer" || t === "number") return s.minimum ?? 0;
  if (t === "boolean") return false;
  return null;
}
function operation(path, method, op) {
  const out = el("pre", { text: "" });
  const fields = (op.parameters || []).map((p) => {
    const input = el("input", { name: p.name, placeholder: p.in + (p.required ? " (required)" : "") });
    return { p, input, label: el("label", {}, el("span", { class: "p", text: p.name + " " }), input) };
  });
  const json = op.requestBody && op.requestBody.content["application/json"];
  const bodySchema = json ? json.schema : null;
  const text = el("textarea", {});
  text.value = bodySchema ? JSON.stringify(example(bodySchema), null, 2) : "";
  const send = el("button", { type: "button", text: "Send" });
  send.onclick = async () => {
    let url = path;
    const q = new URLSearchParams();
    for (const { p, input } of fields) {
      if (!input.value) continue;
      if (p.in === "path") url = url.replace("{" + p.name + "}", encodeURIComponent(input.value));
      else if (p.in === "query") q.set(p.name, input.value);
    }
    url = url.replace(/^\\//, "") + (q.size ? "?" + q : "");
    const init = { method: method.toUpperCase(), headers: headers(op.requestBody ? { "content-type": "application/json" } : {}) };
    if (op.requestBody) init.body = text.value;
    out.textContent = "…";
    try {
      const res = await fetch(url, init);
      const body = await res.text();
      let shown = body;
      try { shown = JSON.stringify(JSON.parse(body), null, 2); } catch {}
      out.textContent = res.status + " " + res.statusText + "\\n\\n" + shown;
    } catch (err) {
      out.textContent = String(err);
    }
  };
  const responses = Object.entries(op.responses || {}).map(([code, r]) => code + ": " + r.description).join("\\n");
  return el(
    "details", { class: "op" },
    el("summary", {}, el("span", { class: "m", text: method }), el("span", { class: "p", text: path }), el("span", { class: "s", text: op.summary || "" })),
    el("div", { class: "body" },
      el("p", { text: op.description || "" }),
      ...fields.map((f) => f.label),
      ...(bodySchema ? [el("details", {}, el("summary", { text: "body schema" }), el("pre", { text: JSON.stringify(bodySchema, null, 2) })), text] : []),
      el("pre", { class: "s", text: responses }),
      send, out),
  );
}
async function load() {
  const res = await fetch("openapi.json", { headers: headers() });
  if (res.status === 401) {
    document.getElementById("auth").style.display = "block";
    document.getElementById("ops").textContent = "";
    document.getElementById("autherr").textContent = token ? "refused" : "";
    return;
  }
  document.getElementById("auth").style.display = "none";
  const doc = await res.json();
  const byTag = new Map();
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item)) {
      const tag = (op.tags && op.tags[0]) || "other";
      if (!byTag.has(tag)) byTag.set(tag, []);
      byTag.get(tag).push(operation(path, method, op));
    }
  }
  const ops = document.getElementById("ops");
  ops.textContent = "";
  for (const [tag, list] of byTag) ops.append(el("h2", { text: tag }), ...list);
}
document.getElementById("auth").onsubmit = (e) => {
  e.preventDefault();
  token = document.getElementById("token").value;
  load();
};
load();
</script>
</body>
</html>
`;
