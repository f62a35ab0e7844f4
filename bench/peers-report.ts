/**
 * `npx tsx bench/peers-report.ts [results.json]` — writes the peer table of
 * BENCHMARKS.md (between its `peers:begin` / `peers:end` markers) from the
 * figures bench/peers.ts saved (default bench/results/peers.json), with the
 * issue's targets checked against them, and keeps a copy of the figures in
 * docs/benchmarks/peers-run.json. Nothing in the table is typed by hand.
 */
import { copyFileSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { writeGeneratedSection } from "./lib/generated-section.ts";
import { peerVersions, type PeerName } from "./lib/versions.ts";

type Doc = Record<string, unknown> & {
  meta: {
    started_at: string;
    commit: string | null;
    loadavg_start: number[];
    loadavg_end: number[];
    postgres: Record<string, string>;
    config: { passes: number; workflows: number; steps: number; pool: number; rounds: number; rttMs: number };
    samples: Record<string, number[]>;
    /** The peers' installed versions when the run was made (runs before this field: read from node_modules now). */
    versions?: Record<PeerName, string>;
  };
};

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const source = process.argv[2] ?? join(root, "bench", "results", "peers.json");
const doc = JSON.parse(readFileSync(source, "utf8")) as Doc;
const num = (k: string): number | null => (typeof doc[k] === "number" ? (doc[k] as number) : null);

function fmt(v: number | null, digits = 2): string {
  if (v === null) return "—";
  if (Math.abs(v) >= 100) return Math.round(v).toLocaleString("en-US");
  return v.toFixed(digits);
}
/** Throughput: whole numbers. */
const rate = (v: number | null) => (v === null ? "—" : Math.round(v).toLocaleString("en-US"));
const ratio = (a: number | null, b: number | null) => (a !== null && b ? a / b : null);
const withMs = (v: number | null) => (v === null ? "—" : `${fmt(v, 1)} ms`);
const x = (v: number | null) => (v === null ? "—" : `${v.toFixed(2)}×`);
/** min–max over the passes, for the loopback throughput. */
function spread(k: string): string {
  const s = doc.meta.samples[k];
  if (!s || s.length < 2) return "";
  return ` (${rate(Math.min(...s))}–${rate(Math.max(...s))})`;
}

const m = doc.meta;
const versions = m.versions ?? peerVersions();
const PEERS = [
  ["local", "Edda local"],
  ["dbos", `DBOS ${versions.dbos}`],
  ["absurd", `Absurd ${versions.absurd}`],
  ["graphile", `graphile-worker ${versions.graphile}`],
] as const;
const load = (l: number[]) => l.map((v) => v.toFixed(1)).join(" / ");
const local = num("peers_local_steps_per_s");
const localRtt = num("peers_rtt_local_steps_per_s");
const ceiling = num("peers_ceiling_commits_per_s");
const ceilingRtt = num("peers_rtt_ceiling_commits_per_s");

const row = (label: string, cells: string[]) => `| ${label} | ${cells.join(" | ")} |`;
const lines: string[] = [];
lines.push(
  `Run of ${m.started_at.slice(0, 16).replace("T", " ")} UTC, commit \`${m.commit ?? "?"}\`, Postgres ${String(m.postgres.server_version).split(" ")[0]}` +
    ` with fsync=${m.postgres.fsync}, synchronous_commit=${m.postgres.synchronous_commit}; ${m.config.workflows} concurrent ${m.config.steps}-step pipelines, pool ${m.config.pool},` +
    ` loopback figures the median of ${m.config.passes} pass${m.config.passes === 1 ? "" : "es"} (min–max in brackets), 10 ms RTT one pass.` +
    ` Load average (1/5/15 min) ${load(m.loadavg_start)} at the start, ${load(m.loadavg_end)} at the end, on 2 shared cores.`,
  "",
);
lines.push(row("", [...PEERS.map(([, l]) => l), "INSERT ceiling"]));
lines.push(row("---", [...PEERS.map(() => "---:"), "---:"]));
lines.push(row("steps/s, loopback", [...PEERS.map(([p]) => rate(num(`peers_${p}_steps_per_s`)) + spread(`peers_${p}_steps_per_s`)), `${rate(ceiling)} commits/s${spread("peers_ceiling_commits_per_s")}`]));
lines.push(row("Edda ÷ peer", [...PEERS.map(([p]) => (p === "local" ? "—" : x(ratio(local, num(`peers_${p}_steps_per_s`))))), x(ratio(local, ceiling))]));
lines.push(row("steps/s, 10 ms RTT", [...PEERS.map(([p]) => rate(num(`peers_rtt_${p}_steps_per_s`))), `${rate(ceilingRtt)} commits/s`]));
lines.push(row("10 ms RTT: Edda ÷ peer", [...PEERS.map(([p]) => (p === "local" ? "—" : x(ratio(localRtt, num(`peers_rtt_${p}_steps_per_s`))))), x(ratio(localRtt, ceilingRtt))]));
lines.push(row("round trips per step, 10 ms RTT, all concurrent", [...PEERS.map(([p]) => fmt(num(`peers_rtt_${p}_round_trips_per_step`))), "1 per commit"]));
lines.push(row("one round trip, p50 (the 10 ms delay + the server's time; all concurrent)", [...PEERS.map(([p]) => withMs(num(`peers_rtt_${p}_round_trip_p50_ms`))), "—"]));
lines.push(row("round trips per step, one pipeline alone (its start included)", [...PEERS.map(([p]) => fmt(num(`peers_rtt_${p}_alone_round_trips_per_step`))), "—"]));
lines.push(
  row("Edda, one pipeline alone: round trips of its start / per step after it (transactional; `transactional: false`)", [
    `${fmt(num("peers_rtt_local_alone_start_round_trips"))} / ${fmt(num("peers_rtt_local_alone_step_round_trips_per_step"))}; ${fmt(num("peers_rtt_local_nontx_alone_start_round_trips"))} / ${fmt(num("peers_rtt_local_nontx_alone_step_round_trips_per_step"))}`,
    "—",
    "—",
    "—",
    "—",
  ]),
);
lines.push(
  row("Edda: cold step / warm step round trips (latency ms)", [
    `${fmt(num("peers_rtt_local_cold_round_trips_per_step"))} cold (${fmt(num("peers_rtt_local_cold_step_ms"), 0)} ms), ${fmt(num("peers_rtt_local_warm_round_trips_per_step"))} warm (${fmt(num("peers_rtt_local_warm_step_ms"), 0)} ms)`,
    "—",
    "—",
    "—",
    "—",
  ]),
);
lines.push(row("CPU per step, Node (loopback)", [...PEERS.map(([p]) => `${fmt(num(`peers_${p}_node_cpu_ms_per_step`))} ms`), `${fmt(num("peers_ceiling_node_cpu_ms_per_step"))} ms per commit`]));
lines.push(row("CPU per step, Postgres backends (loopback)", [...PEERS.map(([p]) => `${fmt(num(`peers_${p}_pg_cpu_ms_per_step`))} ms`), `${fmt(num("peers_ceiling_pg_cpu_ms_per_step"))} ms per commit`]));
lines.push("");

// The issue's targets (Lean, batched steps), against this run.
const t = (name: string, value: string, met: boolean | null) => `| ${name} | ${value} | ${met === null ? "not measured" : met ? "**met**" : "missed"} |`;
const ge = (a: number | null, f: number, b: number | null) => (a !== null && b !== null ? a >= f * b : null);
const le = (a: number | null, b: number) => (a !== null ? a <= b : null);
const absurd = num("peers_absurd_steps_per_s");
const absurdRtt = num("peers_rtt_absurd_steps_per_s");
const dbos = num("peers_dbos_steps_per_s");
const dbosRtt = num("peers_rtt_dbos_steps_per_s");
const cold = num("peers_rtt_local_cold_round_trips_per_step");
// Per step, the start's own round trips counted apart (older runs recorded only the figure with the start in it).
const warmNonTxSteps = num("peers_rtt_local_nontx_alone_step_round_trips_per_step");
const warmNonTx = warmNonTxSteps ?? num("peers_rtt_local_nontx_alone_round_trips_per_step");
const nonTxStart = num("peers_rtt_local_nontx_alone_start_round_trips");
const p50 = num("peers_rtt_local_step_p50_ms");
const cpu = num("peers_local_node_cpu_ms_per_step");
lines.push("| Target | This run | |", "|---|---|---|");
lines.push(t("Edda ≥ 1.5× Absurd, loopback", x(ratio(local, absurd)), ge(local, 1.5, absurd)));
lines.push(t("Edda ≥ 1.5× Absurd, 10 ms RTT", x(ratio(localRtt, absurdRtt)), ge(localRtt, 1.5, absurdRtt)));
lines.push(t("Edda ≥ 2× DBOS, loopback", x(ratio(local, dbos)), ge(local, 2, dbos)));
lines.push(t("Edda ≥ 2× DBOS, 10 ms RTT", x(ratio(localRtt, dbosRtt)), ge(localRtt, 2, dbosRtt)));
lines.push(t("Edda ≥ 0.5× the INSERT ceiling, loopback", x(ratio(local, ceiling)), ge(local, 0.5, ceiling)));
lines.push(t("Edda ≥ 0.5× the INSERT ceiling, 10 ms RTT", x(ratio(localRtt, ceilingRtt)), ge(localRtt, 0.5, ceilingRtt)));
lines.push(t("≤ 2 round trips per cold step (10 ms RTT)", fmt(cold), le(cold, 2)));
lines.push(
  t(
    warmNonTxSteps === null
      ? "≤ 1 round trip per warm non-transactional step (one `transactional: false` pipeline alone, its start included)"
      : `≤ 1 round trip per warm non-transactional step (one \`transactional: false\` pipeline alone, every step; its start, ${fmt(nonTxStart)} round trip${nonTxStart === 1 ? "" : "s"}, counted apart)`,
    fmt(warmNonTx),
    le(warmNonTx, 1),
  ),
);
const rtP50 = num("peers_rtt_local_round_trip_p50_ms");
lines.push(t("step p50 ≤ 25 ms at 10 ms RTT (all concurrent, local dispatcher)", `${fmt(p50)} ms${rtP50 === null ? "" : ` (its one round trip: ${fmt(rtP50, 1)} ms p50)`}`, le(p50, 25)));
lines.push(t("Node CPU ≤ 0.5 ms per step (loopback)", `${fmt(cpu)} ms`, le(cpu, 0.5)));

const BEGIN = "<!-- peers:begin (bench/peers-report.ts writes this section) -->";
const END = "<!-- peers:end -->";
writeGeneratedSection(join(root, "BENCHMARKS.md"), BEGIN, END, lines.join("\n"));
copyFileSync(source, join(root, "docs", "benchmarks", "peers-run.json"));
console.log(`wrote the peer table of BENCHMARKS.md from ${source}`);
