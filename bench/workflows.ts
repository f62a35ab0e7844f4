/**
 * The workflows the benchmark runs. `pipeline` is the shipped example
 * (functions/workflows/pipeline.ts): N sequential transactional activities,
 * one durable step each. The others exist only to set up a scenario.
 */
import { activity, receive, sleep, subscribe, workflow } from "../src/index.ts";
export { pipeline } from "../functions/workflows/pipeline.ts";

/** Parks on a one-hour timer (the sweeper scenario expires it by hand), then completes. */
export const timerWake = workflow("bench_timer_wake", async (ctx) => {
  await sleep(ctx, 3600);
  return "woke";
});

export const probeStep = activity("bench_probe_step", async (_ctx, n: number) => ({ n }));

/**
 * Builds `history` entries in one step (activities of one tick run together),
 * then takes `probes` more single-activity steps, each timed by the replay
 * scenario against a history of `history` (+ the probes before it) entries.
 */
export const replayProbe = workflow("bench_replay_probe", async (ctx, { history, probes }: { history: number; probes: number }) => {
  await Promise.all(Array.from({ length: history }, (_, i) => probeStep(ctx, i)));
  for (let i = 0; i < probes; i++) await probeStep(ctx, -1 - i);
  return { history, probes };
});

export const FANOUT_CHANNEL = "bench_fanout";

/** Subscribes to the broadcast channel, waits for one message, completes with it. */
export const fanoutSubscriber = workflow("bench_fanout_subscriber", async (ctx) => {
  await subscribe(ctx, FANOUT_CHANNEL, "broadcast");
  const m = await receive(ctx, FANOUT_CHANNEL);
  return m.data;
});

export const pipelineStepNonTx = activity("bench_pipeline_step_nontx", async (ctx, n: number) => ({ n, at: ctx.activityId }), { transactional: false });

/** `pipeline` with non-transactional activities: no BEGIN/COMMIT around the step (at-least-once). */
export const pipelineNonTx = workflow("bench_pipeline_nontx", async (ctx, { steps }: { steps: number }) => {
  for (let i = 1; i <= steps; i++) await pipelineStepNonTx(ctx, i);
  return { completed: steps };
});
