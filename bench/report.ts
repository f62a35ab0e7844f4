/**
 * Turning a run's figures into the stdout table, the targets check and the
 * steps/s bar chart (a hand-written SVG, no dependencies).
 */

export type Figures = Record<string, number | string | null | undefined>;

export interface Target {
  name: string;
  met: boolean | null;
  detail: string;
}

const n = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : null);

function fmt(v: number | string | null | undefined): string {
  if (v === null || v === undefined) return "—";
  if (typeof v === "string") return v;
  if (Math.abs(v) >= 100) return Math.round(v).toLocaleString("en-US");
  return v.toFixed(2);
}

export function checkTargets(f: Figures): Target[] {
  const local = n(f.local_steps_per_s);
  const dbos = n(f.dbos_steps_per_s);
  const ceiling = n(f.ceiling_commits_per_s);
  const h10 = n(f.replay_ms_h10);
  const h1000 = n(f.replay_ms_h1000);
  const sps = n(f.statements_per_step);
  const t = (name: string, ok: boolean | null, detail: string): Target => ({ name, met: ok, detail });
  return [
    t("local_steps_per_s ≥ dbos_steps_per_s", local !== null && dbos !== null ? local >= dbos : null, `${fmt(local)} vs ${fmt(dbos)}`),
    t("local_steps_per_s ≥ 0.5 × ceiling", local !== null && ceiling !== null ? local >= 0.5 * ceiling : null, `${fmt(local)} vs ${fmt(ceiling === null ? null : ceiling / 2)} (ratio ${fmt(local !== null && ceiling ? local / ceiling : null)})`),
    t("replay_ms_h1000 ≤ 1.5 × replay_ms_h10", h10 !== null && h1000 !== null ? h1000 <= 1.5 * h10 : null, `${fmt(h1000)} ms vs ${fmt(h10 === null ? null : 1.5 * h10)} ms (ratio ${fmt(h10 && h1000 !== null ? h1000 / h10 : null)})`),
    t("statements_per_step ≤ 3", sps !== null ? sps <= 3 : null, fmt(sps)),
    ...freshTargets(f),
    ...perRequestTargets(f),
  ];
}

/** The per-request paths against the pinned one, and cold replay (issue 36). */
function perRequestTargets(f: Figures): Target[] {
  const local = n(f.local_steps_per_s);
  const http = n(f.http_steps_per_s);
  const queue = n(f.queue_steps_per_s);
  const cpu = n(f.node_cpu_ms_per_step);
  const httpCpu = n(f.http_cpu_ms_per_step);
  const perEntry = n(f.replay_cold_cpu_us_per_entry);
  const at5k = n(f.replay_cold_cpu_ms_h5000);
  const ratio = (a: number | null, b: number | null) => (a !== null && b ? a / b : null);
  return [
    { name: "http_steps_per_s ≥ 0.5 × local_steps_per_s", met: http !== null && local ? http >= 0.5 * local : null, detail: `${fmt(http)} vs ${fmt(local)} (ratio ${fmt(ratio(http, local))})` },
    { name: "queue_steps_per_s ≥ 0.8 × local_steps_per_s", met: queue !== null && local ? queue >= 0.8 * local : null, detail: `${fmt(queue)} vs ${fmt(local)} (ratio ${fmt(ratio(queue, local))})` },
    { name: "http_cpu_ms_per_step ≤ 2 × node_cpu_ms_per_step", met: httpCpu !== null && cpu ? httpCpu <= 2 * cpu : null, detail: `${fmt(httpCpu)} ms vs ${fmt(cpu)} ms (ratio ${fmt(ratio(httpCpu, cpu))})` },
    { name: "replay_cold_cpu_us_per_entry ≤ 2", met: perEntry === null ? null : perEntry <= 2, detail: `${fmt(perEntry)} µs` },
    { name: "replay_cold_cpu_ms_h5000 ≤ 10", met: at5k === null ? null : at5k <= 10, detail: `${fmt(at5k)} ms` },
  ];
}

/** What a step on a client of its own pays (the latency-fresh scenario, issue 29). */
function freshTargets(f: Figures): Target[] {
  const trust = n(f.latency_fresh_round_trips_per_step);
  const scram = n(f.latency_fresh_scram_round_trips_per_step);
  const ms = n(f.latency_fresh_step_ms);
  const pooled = n(f.latency_pooled_step_ms);
  return [
    { name: "latency_fresh_round_trips_per_step ≤ 3 (trust)", met: trust === null ? null : trust <= 3, detail: fmt(trust) },
    { name: "latency_fresh_scram_round_trips_per_step ≤ 5", met: scram === null ? null : scram <= 5, detail: fmt(scram) },
    { name: "latency_fresh_rtt_ratio ≤ 1.3 (trust: step latency over its round trips × RTT)", met: n(f.latency_fresh_rtt_ratio) === null ? null : n(f.latency_fresh_rtt_ratio)! <= 1.3, detail: fmt(n(f.latency_fresh_rtt_ratio)) },
    { name: "latency_fresh_step_ms ≤ 1.5 × latency_pooled_step_ms", met: ms !== null && pooled ? ms <= 1.5 * pooled : null, detail: `${fmt(ms)} ms vs ${fmt(pooled)} ms` },
  ];
}

export function renderTable(f: Figures, rows: [label: string, key: string, unit: string][]): string {
  const lines = rows.map(([label, key, unit]) => [label, fmt(f[key]), unit, key]);
  const w = [0, 1, 2, 3].map((i) => Math.max(...lines.map((l) => l[i]!.length)));
  return lines.map((l) => `${l[0]!.padEnd(w[0]!)}  ${l[1]!.padStart(w[1]!)}  ${l[2]!.padEnd(w[2]!)}  ${l[3]}`).join("\n");
}

export function renderTargets(targets: Target[]): string {
  return targets.map((t) => `${t.met === null ? "n/a " : t.met ? "MET " : "MISS"}  ${t.name}  (${t.detail})`).join("\n");
}

const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

/** Horizontal bars, one per figure, scaled to the largest. */
export function renderChart(title: string, subtitle: string, bars: { label: string; value: number | null; color: string }[]): string {
  const width = 720;
  const left = 190;
  const right = 110;
  const barH = 34;
  const gap = 16;
  const top = 70;
  const height = top + bars.length * (barH + gap) + 30;
  const max = Math.max(1, ...bars.map((b) => b.value ?? 0));
  const scale = (width - left - right) / max;
  const rows = bars
    .map((b, i) => {
      const y = top + i * (barH + gap);
      const w = b.value === null ? 0 : Math.max(1, b.value * scale);
      const text = b.value === null ? "not measured" : `${Math.round(b.value).toLocaleString("en-US")} /s`;
      return [
        `<text x="${left - 10}" y="${y + barH / 2 + 5}" text-anchor="end">${esc(b.label)}</text>`,
        `<rect x="${left}" y="${y}" width="${w.toFixed(1)}" height="${barH}" fill="${b.color}" rx="3"/>`,
        `<text x="${(left + w + 8).toFixed(1)}" y="${y + barH / 2 + 5}">${esc(text)}</text>`,
      ].join("\n    ");
    })
    .join("\n    ");
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="system-ui, -apple-system, Segoe UI, sans-serif" font-size="14">
  <rect width="100%" height="100%" fill="#ffffff"/>
  <text x="20" y="30" font-size="18" font-weight="600">${esc(title)}</text>
  <text x="20" y="52" font-size="12" fill="#555">${esc(subtitle)}</text>
  <g fill="#222">
    ${rows}
  </g>
</svg>
`;
}
