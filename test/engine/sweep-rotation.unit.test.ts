// The order a sweep with a CPU budget runs its tasks in (engine/sweep-rotation.ts):
// the priority tasks lead, the order is a permutation of the table, and within
// any n consecutive turns every other task is once at the head of the
// rotation — the one position that runs however small the budget.
import fc from "fast-check";
import { expect, test } from "vitest";
import { mustRun, rotationTurn, sweepOrder } from "../../src/engine/sweep-rotation.ts";

const tables = fc.uniqueArray(fc.integer({ min: 0, max: 40 }), { minLength: 1, maxLength: 16 }).chain((tasks) =>
  fc.record({ tasks: fc.constant(tasks), priority: fc.subarray(tasks), start: fc.integer({ min: -1e6, max: 1e6 }) }),
);

test("priority tasks first, in table order; the order is a permutation of the table", () => {
  fc.assert(
    fc.property(tables, ({ tasks, priority, start }) => {
      const order = sweepOrder(tasks, new Set(priority), start);
      expect([...order].sort((a, b) => a - b)).toEqual([...tasks].sort((a, b) => a - b));
      expect(order.slice(0, priority.length)).toEqual(tasks.filter((t) => priority.includes(t)));
    }),
  );
});

test("within n consecutive turns every non-priority task runs at least once, with only the must-run positions", () => {
  fc.assert(
    fc.property(tables, ({ tasks, priority, start }) => {
      const rest = tasks.filter((t) => !priority.includes(t));
      const ran = new Set<number>();
      for (let turn = start; turn < start + Math.max(1, rest.length); turn++) {
        sweepOrder(tasks, new Set(priority), turn).forEach((t, position) => mustRun(position, priority.length) && ran.add(t));
      }
      expect([...ran].sort((a, b) => a - b)).toEqual([...tasks].sort((a, b) => a - b));
    }),
  );
});

test("one turn per minute", () => {
  expect(rotationTurn(0)).toBe(0);
  expect(rotationTurn(59_999)).toBe(0);
  expect(rotationTurn(60_000)).toBe(1);
});
