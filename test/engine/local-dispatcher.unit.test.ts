// The in-process dispatcher (engine/dispatcher.ts LocalDispatcher) over a
// runner whose steps the test holds open — no database: at most
// `concurrency` steps run at once and the rest wait in order; a step waiting
// outside its slot (non-transactional activities) lends it, and takes one
// back before the queued steps; a failing step is logged and the others go
// on; a step dispatched in a request's scope is part of that request's
// background work; wake-ups due together fire once; close() drops what is
// queued and waits for what runs. The same on real Postgres with slow
// activities: test/engine/local-slots.test.ts.
import { describe, expect, it, vi } from "vitest";
import { LocalDispatcher, type DispatchScope, type StepRequest, type StepRunner } from "../../src/engine/dispatcher.ts";

function held() {
  const started: string[] = [];
  const finished: string[] = [];
  const gates = new Map<string, () => void>();
  const scopes = new Map<string, DispatchScope | undefined>();
  let fired = 0;
  const runner: StepRunner = {
    runStep: (req: StepRequest, scope?: DispatchScope) => {
      started.push(req.instanceId);
      scopes.set(req.instanceId, scope);
      return new Promise<void>((resolve, reject) =>
        gates.set(req.instanceId, () => {
          finished.push(req.instanceId);
          if (req.instanceId.startsWith("bad")) reject(new Error("boom"));
          else resolve();
        }),
      );
    },
    fireDueTimers: async () => ++fired,
  };
  const release = async (id: string) => {
    gates.get(id)!();
    await new Promise((r) => setTimeout(r, 0));
  };
  return { runner, started, finished, scopes, release, fired: () => fired };
}

const tick = () => new Promise((r) => setTimeout(r, 0));

describe("local dispatcher", () => {
  it("runs at most `concurrency` steps at once, the rest in dispatch order", async () => {
    const h = held();
    const d = new LocalDispatcher({ concurrency: 2 });
    d.attach(h.runner);
    for (const id of ["a", "b", "c", "d"]) d.dispatch({ instanceId: id });
    await tick();
    expect(h.started).toEqual(["a", "b"]);
    await h.release("b");
    expect(h.started).toEqual(["a", "b", "c"]);
    await h.release("a");
    await h.release("c");
    await h.release("d");
    await d.idle();
    expect(h.finished).toEqual(["b", "a", "c", "d"]);
    await d.close();
  });

  it("a step waiting outside its slot lends it, and takes one back ahead of the queue", async () => {
    const h = held();
    const d = new LocalDispatcher({ concurrency: 1 });
    d.attach(h.runner);
    d.dispatch({ instanceId: "slow" });
    d.dispatch({ instanceId: "q1" });
    d.dispatch({ instanceId: "q2" });
    await tick();
    expect(h.started).toEqual(["slow"]);
    let answer!: () => void;
    const outside = h.scopes.get("slow")!.outsideSlot!(() => new Promise<void>((r) => (answer = r)));
    await tick();
    expect(h.started).toEqual(["slow", "q1"]); // the slot was lent
    answer();
    let back = false;
    void outside.then(() => (back = true));
    await tick();
    expect(back).toBe(false); // q1 holds the only slot
    await h.release("q1");
    expect(back).toBe(true); // served before q2
    expect(h.started).toEqual(["slow", "q1"]);
    await h.release("slow");
    expect(h.started).toEqual(["slow", "q1", "q2"]);
    await h.release("q2");
    await d.close();
  });

  it("a failing step is logged with its instance and the others go on; idle() resolves when all are done", async () => {
    const logged = vi.spyOn(console, "error").mockImplementation(() => undefined);
    try {
      const h = held();
      const d = new LocalDispatcher({ concurrency: 1 });
      d.attach(h.runner);
      d.dispatch({ instanceId: "bad-1" });
      d.dispatch({ instanceId: "ok-1" });
      let idle = false;
      void d.idle().then(() => (idle = true));
      await h.release("bad-1");
      await h.release("ok-1");
      await tick();
      expect(idle).toBe(true);
      expect(h.finished).toEqual(["bad-1", "ok-1"]);
      expect(JSON.parse(String(logged.mock.calls[0]![0]))).toMatchObject({ msg: "edda: step failed", instance_id: "bad-1", error_class: "Error" });
      await d.close();
    } finally {
      logged.mockRestore();
    }
  });

  it("a step dispatched in a request's scope is that request's background work until it ends", async () => {
    const h = held();
    const d = new LocalDispatcher();
    d.attach(h.runner);
    const work: Promise<unknown>[] = [];
    d.dispatch({ instanceId: "a" }, { waitUntil: (p) => void work.push(p) });
    let done = false;
    void Promise.all(work).then(() => (done = true));
    await tick();
    expect(done).toBe(false);
    await h.release("a");
    expect(done).toBe(true);
    await d.close();
  });

  it("wake-ups due together fire once; one past maxWakeSeconds is left to the sweep; close() drops the queue", async () => {
    const h = held();
    const d = new LocalDispatcher({ concurrency: 1, maxWakeSeconds: 1 });
    d.attach(h.runner);
    for (let i = 0; i < 5; i++) d.wakeIn(0);
    d.wakeIn(2);
    await new Promise((r) => setTimeout(r, 80));
    expect(h.fired()).toBe(1);
    d.dispatch({ instanceId: "running" });
    d.dispatch({ instanceId: "queued" });
    await tick();
    const closed = d.close();
    await h.release("running");
    await closed;
    d.dispatch({ instanceId: "after" });
    await tick();
    expect(h.started).toEqual(["running"]);
  });
});
