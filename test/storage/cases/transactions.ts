// transaction(): atomicity, savepoints, and the post-commit callback rules.
import { describe, expect, it, vi } from "vitest";
import { storageOn } from "../../../src/storage/pg-storage.ts";
import type { TxStorage } from "../../../src/storage/types.ts";
import { newInstance, SOURCE_HASH, uid, WORKFLOW, type ContractContext } from "./helpers.ts";

export function transactionCases(ctx: ContractContext): void {
  describe("transactions and afterCommit", () => {
    it("runs callbacks in order after the commit, when the writes are visible", async () => {
      const order: string[] = [];
      const id = uid("wf");
      let seenInside: string[] = [];
      await ctx.storage.transaction(async (tx) => {
        await newInstance(tx, { instanceId: id });
        tx.afterCommit(() => void order.push("1"));
        tx.afterCommit(async () => {
          // runs after COMMIT: another connection/statement sees the row
          order.push((await ctx.storage.getInstance(id)) ? "2:visible" : "2:missing");
        });
        tx.afterCommit(() => void order.push("3"));
        seenInside = [...order];
      });
      expect(seenInside).toEqual([]);
      expect(order).toEqual(["1", "2:visible", "3"]);
      expect("afterCommit" in ctx.storage).toBe(false);
    });

    it("a method taken off a transaction's Storage runs in that transaction (rolled back with it)", async () => {
      const id = uid("wf");
      const { getInstance: readOutside } = ctx.storage;
      await expect(
        ctx.storage.transaction(async (tx) => {
          const { createInstance, getInstance } = tx;
          await createInstance({ instanceId: id, workflowName: WORKFLOW, sourceHash: SOURCE_HASH, ownerService: "contract", inputData: "{}" });
          expect((await getInstance(id))?.instanceId).toBe(id);
          throw new Error("roll back");
        }),
      ).rejects.toThrow("roll back");
      expect(await readOutside(id)).toBeNull();
    });

    it("discards callbacks and writes when the transaction rolls back", async () => {
      const ran: string[] = [];
      const id = uid("wf");
      await expect(
        ctx.storage.transaction(async (tx) => {
          await newInstance(tx, { instanceId: id });
          tx.afterCommit(() => void ran.push("x"));
          throw new Error("boom");
        }),
      ).rejects.toThrow("boom");
      expect(ran).toEqual([]);
      expect(await ctx.storage.getInstance(id)).toBeNull();
    });

    it("discards a rolled-back savepoint's callbacks and writes; a released savepoint's join the parent in order", async () => {
      const ran: string[] = [];
      const [kept, dropped] = [uid("wf"), uid("wf")];
      const result = await ctx.storage.transaction(async (tx) => {
        tx.afterCommit(() => void ran.push("outer-1"));
        await tx.transaction(async (sp) => {
          await newInstance(sp, { instanceId: kept });
          sp.afterCommit(() => void ran.push("released"));
          await sp.transaction(async (inner) => {
            inner.afterCommit(() => void ran.push("released-inner"));
          });
        });
        await tx
          .transaction(async (sp) => {
            await newInstance(sp, { instanceId: dropped });
            sp.afterCommit(() => void ran.push("rolled-back"));
            await sp.transaction(async (inner) => {
              inner.afterCommit(() => void ran.push("rolled-back-inner"));
            });
            throw new Error("savepoint fails");
          })
          .catch(() => undefined);
        tx.afterCommit(() => void ran.push("outer-2"));
        expect(ran).toEqual([]);
        return 42;
      });
      expect(result).toBe(42);
      expect(ran).toEqual(["outer-1", "released", "released-inner", "outer-2"]);
      expect(await ctx.storage.getInstance(kept)).not.toBeNull();
      expect(await ctx.storage.getInstance(dropped)).toBeNull();
    });

    it("keeps running the other callbacks when one throws (sync or async), logging the failure", async () => {
      const errors = vi.spyOn(console, "error").mockImplementation(() => undefined);
      try {
        const ran: string[] = [];
        await ctx.storage.transaction(async (tx) => {
          tx.afterCommit(() => void ran.push("a"));
          tx.afterCommit(() => {
            throw new Error("sync failure");
          });
          tx.afterCommit(async () => {
            await Promise.resolve();
            throw new Error("async failure");
          });
          tx.afterCommit(() => void ran.push("d"));
        });
        expect(ran).toEqual(["a", "d"]);
        expect(errors).toHaveBeenCalledTimes(2);
      } finally {
        errors.mockRestore();
      }
    });

    it("refuses afterCommit after the transaction ended, and on a Storage over a foreign transaction", async () => {
      let leaked: TxStorage | undefined;
      await ctx.storage.transaction(async (tx) => {
        leaked = tx;
      });
      expect(() => leaked!.afterCommit(() => undefined)).toThrow(/already ended/);

      await ctx.database.db.transaction(async (raw) => {
        const foreign = storageOn(raw);
        await foreign.transaction(async (sp) => {
          expect(() => sp.afterCommit(() => undefined)).toThrow(/did not start/);
        });
      });
    });
  });
}
