/**
 * `npx tsx scripts/step-costs.ts [bench/results/latency-fresh.json]`
 *
 * Writes what a step costs per platform (docs/deploying.md, "What a step costs") and what each
 * round trip is (BENCHMARKS.md) from the `latency-fresh` bench scenario's
 * output, between the `<!-- step-costs:… -->` markers. Run the scenario first:
 * `npx tsx bench/run.ts --only=latency-fresh`.
 */
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { writeGeneratedSection } from "../bench/lib/generated-section.ts";

interface Variant {
  label: string;
  round_trips: number | null;
  step_ms: number | null;
  flights: string[];
  /** Per round trip of that step: the delay plus the server's time. */
  flight_ms?: (number | null)[];
}

interface Results {
  rtt_ms: number;
  meta: { started_at: string; commit: string | null; steps_per_variant: number; loadavg_start: number[]; loadavg_end: number[] };
  variants: Record<string, Variant>;
}

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const results = JSON.parse(readFileSync(process.argv[2] ?? join(root, "bench", "results", "latency-fresh.json"), "utf8")) as Results;
const v = (key: string): Variant => {
  const found = results.variants[key];
  if (!found || found.round_trips === null) throw new Error(`latency-fresh.json has no figures for ${key} (was the scenario run on the throwaway cluster?)`);
  return found;
};

const SETUP = new Set(["WebSocketUpgrade", "WebSocketClose", "SSLRequest", "Startup", "Password"]);

/** What one round trip is, from its messages. */
function nameOf(flight: string): string {
  const messages = flight.split(/ (?=[A-Z])/);
  if (messages.every((m) => SETUP.has(m))) {
    if (messages.includes("WebSocketUpgrade")) return "WebSocket upgrade";
    return messages.includes("Password") ? "SCRAM message" : "start-up";
  }
  // Several statements in one flight (BEGIN with the first, COMMIT behind the conclusion) are named together.
  const statements = [...flight.matchAll(/(?:Parse|Query|Bind)\(([^)]*)\)/g)].map((m) => m[1]!).filter((st, i, all) => i === 0 || st !== all[i - 1]);
  const whatOf = (statement: string) =>
    // Only the conclusion carries the last-statement marker (runs recorded before pg-messages.ts skipped it show the marker alone).
    /^\/\* edda:last \*\/$/.test(statement)
      ? "fenced conclusion"
      : /^SELECT instance_id/i.test(statement)
      ? "lease + history read"
      : /^WITH upd AS/i.test(statement)
        ? "fenced conclusion"
        : /^begin/i.test(statement)
          ? "BEGIN"
          : /^commit/i.test(statement)
            ? "COMMIT"
            : /typarray/i.test(statement)
              ? "array types fetch"
              : statement;
  const what = statements.length ? statements.map(whatOf).join(" + ") : "Bind/Execute of the statement described in the round trip before";
  const prefix = messages.includes("Startup") ? "start-up + password + " : "";
  // postgres.js describes a statement it has not prepared on this connection before executing it.
  if (/Describe Flush$/.test(flight)) return `${what}: Parse/Describe only`;
  if (/^Bind\(/.test(flight)) return `${what} (prepared: Bind/Execute)`;
  return prefix + what;
}

/** Flights before the first statement are set-up. */
const setupTrips = (x: Variant) => x.flights.filter((f) => f.split(/ (?=[A-Z])/).every((m) => SETUP.has(m))).length;
const fmtMs = (ms: number | null) => (ms === null ? "—" : `${Math.round(ms)} ms`);
const load = `${results.meta.loadavg_start.map((l) => l.toFixed(1)).join("/")} → ${results.meta.loadavg_end.map((l) => l.toFixed(1)).join("/")}`;
const source = `\`latency-fresh\` scenario at commit ${results.meta.commit ?? "?"}, ${results.meta.started_at.slice(0, 16).replace("T", " ")} UTC, ${results.rtt_ms} ms round trips through \`bench/lib/latency-proxy.ts\`, median of ${results.meta.steps_per_variant} steps each, load average ${load} on the shared 2-core machine (round trips are exact; latencies carry the load)`;

const trust = v("_default");
const scram = v("_scram");
const prepared = v("_prepared");
const nontx = v("_nontx");
const neon = v("_neon");
const neonScram = v("_neon_scram");
const neonPipelined = v("_neon_pipelined");
const neonEnvelope = v("_neon_envelope");
const neonPipelinedEnvelope = v("_neon_pipelined_envelope");
const pooled = v("_pooled");

const deploying = `Measured by the ${source}; \`npx tsx scripts/step-costs.ts\` writes this table.

| where | per step | round trips | of which set-up | step at ${results.rtt_ms} ms RTT |
|---|---|---|---|---|
| Workers + Hyperdrive (postgres.js) | client per request | ${trust.round_trips! - setupTrips(trust)} to the database, after a start-up with Hyperdrive in the Worker's location | ${setupTrips(trust)} (trust) – ${setupTrips(scram)} (SCRAM), short | ${fmtMs(trust.step_ms)} with trust, the start-up a full round trip away (less with Hyperdrive) |
| Workers, postgres.js straight to Postgres, SCRAM | client per request | ${scram.round_trips} (+ TLS) | ${setupTrips(scram)} | ${fmtMs(scram.step_ms)} |
| Workers or Deno, Neon over WebSockets (\`pipelineConnect\`, Neon's cleartext password) | client per request | ${neonPipelined.round_trips} (+ TLS) | ${setupTrips(neonPipelined)}: the WebSocket upgrade; the start-up travels with the first statement | ${fmtMs(neonPipelined.step_ms)} |
| Neon's driver against a Postgres asking SCRAM | client per request | ${neonScram.round_trips} | ${setupTrips(neonScram)} | ${fmtMs(neonScram.step_ms)} |
| Deno Deploy, Node (one pooled client per instance) | connection open | ${pooled.round_trips} | 0 | ${fmtMs(pooled.step_ms)} |
| Deno Deploy, first step of a new instance (prepared statements) | new connection | ${prepared.round_trips} with trust, ${prepared.round_trips! + setupTrips(scram) - setupTrips(trust)} with SCRAM (+ TLS) | ${setupTrips(prepared)} – ${setupTrips(scram)} | ${fmtMs(prepared.step_ms)} with trust |

A step's transaction begins only when its activity uses \`ctx.tx\`, and then BEGIN and COMMIT travel in the flights of its first and last statements: a \`pipeline\` step, whose activity writes nothing, sends its fenced conclusion alone, as a step of \`transactional: false\` activities does (${nontx.round_trips} round trips on a fresh postgres.js client, ${fmtMs(nontx.step_ms)}).`;

const rows = [
  ["postgres.js, trust, client per step (`prepare: false`, the Workers setting)", trust],
  ["postgres.js, SCRAM, client per step", scram],
  ["postgres.js, trust, client per step, named prepared statements", prepared],
  ["postgres.js, trust, client per step, non-transactional activity", nontx],
  ["Neon over WebSocket, trust", neon],
  ["Neon over WebSocket, SCRAM", neonScram],
  ["Neon over WebSocket, cleartext password + `pipelineConnect`", neonPipelined],
  ["Neon over WebSocket, trust, BEGIN … COMMIT (`lazyTransactions: false`, the driver before)", neonEnvelope],
  ["Neon over WebSocket, cleartext password + `pipelineConnect`, BEGIN … COMMIT (`lazyTransactions: false`)", neonPipelinedEnvelope],
  ["postgres.js, pooled client, connection open (prepared statements)", pooled],
] as const;
const ratio = (x: Variant) => (x.step_ms !== null && pooled.step_ms ? x.step_ms / pooled.step_ms : null);
const within = (x: Variant) => ratio(x) !== null && ratio(x)! <= 1.5;
const targets: [string, boolean, string][] = [
  ["fresh-client cold step ≤ 3 round trips with trust", trust.round_trips! <= 3, `${trust.round_trips}; ${nontx.round_trips} without the transaction envelope`],
  ["≤ 5 with SCRAM", scram.round_trips! <= 5, `${scram.round_trips}; ${nontx.round_trips! + setupTrips(scram) - setupTrips(nontx)} without the transaction envelope`],
  ["latency within 1.5× of the pooled cold step, trust", within(trust), `${fmtMs(trust.step_ms)} vs ${fmtMs(pooled.step_ms)}, ${ratio(trust)?.toFixed(2) ?? "—"}×`],
  ["latency within 1.5× of the pooled cold step, SCRAM", within(scram), `${fmtMs(scram.step_ms)} vs ${fmtMs(pooled.step_ms)}, ${ratio(scram)?.toFixed(2) ?? "—"}×`],
];
const benchmarks = `From the ${source}; \`npx tsx scripts/step-costs.ts\` writes this section.

| cold step of \`pipeline\` (one transactional activity) | round trips | latency | each round trip (of one step: delay + server time) |
|---|---|---|---|
${rows.map(([label, x]) => `| ${label} | **${x.round_trips}** | ${fmtMs(x.step_ms)} | ${x.flights.map((f, i) => `${i + 1}. ${nameOf(f)}${x.flight_ms?.[i] != null ? ` (${Math.round(x.flight_ms[i]!)} ms)` : ""}`).join("; ")} |`).join("\n")}

Targets (issue 29), same run:

${targets.map(([name, met, detail]) => `- ${name}: **${met ? "met" : "missed"}** (${detail})`).join("\n")}

Neon's driver, transactions that begin with their first statement (\`neon-lazy-tx.ts\`) against drizzle's BEGIN … COMMIT, same run: a cold step on a fresh client **${neonPipelinedEnvelope.round_trips} → ${neonPipelined.round_trips}** round trips with Neon's cleartext password and \`pipelineConnect\` (${fmtMs(neonPipelinedEnvelope.step_ms)} → ${fmtMs(neonPipelined.step_ms)}), **${neonEnvelope.round_trips} → ${neon.round_trips}** with trust (${fmtMs(neonEnvelope.step_ms)} → ${fmtMs(neon.step_ms)}); of these, ${setupTrips(neonPipelined)} and ${setupTrips(neon)} are set-up (the WebSocket upgrade, and with trust the start-up).`;

const replaceBlock = (file: string, body: string) => writeGeneratedSection(join(root, file), "<!-- step-costs:start -->", "<!-- step-costs:end -->", body);

const flightsOf = (x: Variant) => x.flights.map((f, i) => `${i + 1}. ${nameOf(f)}`).join("; ");
const design = `Round trips of a cold \`pipeline\` step (one transactional activity that writes nothing), from the ${source}; \`npx tsx scripts/step-costs.ts\` writes this paragraph: **${pooled.round_trips}** on a pooled connection (${flightsOf(pooled)}), **${trust.round_trips}** on a client opened for the step with trust (${flightsOf(trust)}), **${scram.round_trips}** with SCRAM. A warm step (the run kept in memory, the lease handed over in-process) is the conclusion's flight alone. An activity that writes through \`ctx.tx\` adds its statements' flights, with BEGIN in the first and COMMIT behind the conclusion (\`test/storage/postgres-js-lazy-tx.test.ts\` counts them: 2 for one write and the conclusion).`;

replaceBlock("docs/deploying.md", deploying);
replaceBlock("BENCHMARKS.md", benchmarks);
replaceBlock("docs/design.md", design);
console.log("wrote the step-costs blocks of docs/deploying.md, BENCHMARKS.md and docs/design.md");
