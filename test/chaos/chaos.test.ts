// A short chaos run inside `npm test`: real worker processes SIGKILLed and
// restarted while workflows run; nothing lost, nothing duplicated.
import { expect, it } from "vitest";
import { runChaos } from "../../bench/chaos/driver.ts";
import { freshDatabase } from "../support/db.ts";

it("survives workers being killed: nothing lost, nothing duplicated, no lease left held", { timeout: 180_000 }, async () => {
  const r = await runChaos({
    databaseUrl: await freshDatabase("chaos"),
    workers: 3,
    steps: 40,
    sagas: 10,
    consumers: 5,
    jobsPerConsumer: 3,
    listeners: 5,
    news: 5,
    cancels: 8,
    killEveryMs: [300, 700],
    timeoutMs: 120_000,
  });
  expect(r.kills).toBeGreaterThan(0);
  expect(r.violations).toEqual([]);
  expect(r.lost).toBe(0);
  expect(r.duplicated).toBe(0);
});
