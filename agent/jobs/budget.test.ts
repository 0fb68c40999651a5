/** The staging budget's accounting, on the real file system's statfs. */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { InsufficientStorageError } from "../../core/errors.js";
import { freeBytes } from "../../core/disk.js";
import { StagingBudget } from "./budget.js";

const MB = 1024 ** 2;
const dir = mkdtempSync(join(tmpdir(), "kiln-budget-"));

describe("StagingBudget", () => {
  it("parallel admissions cannot overcommit: two of 90 MB against 100 MB, one is refused", async () => {
    const budget = new StagingBudget({ limitBytes: 100 * MB, dir, floorBytes: 0 });
    const outcomes = await Promise.allSettled([budget.admit(90 * MB), budget.admit(90 * MB)]);
    expect(outcomes.map((o) => o.status).sort()).toEqual(["fulfilled", "rejected"]);
    expect((outcomes.find((o) => o.status === "rejected") as PromiseRejectedResult).reason).toBeInstanceOf(InsufficientStorageError);
    expect(budget.usedBytes).toBe(90 * MB);
  });

  it("draws written bytes from the reservation first, charges the rest, and gives back what was not used", async () => {
    const budget = new StagingBudget({ limitBytes: 10 * MB, dir, floorBytes: 0 });
    await budget.admit(4 * MB);
    const owner = {};
    await budget.charge(owner, 3 * MB, 3 * MB); // inside the reservation
    expect(budget.usedBytes).toBe(4 * MB);
    await budget.charge(owner, 2 * MB, 1 * MB); // 1 MB past it
    expect(budget.usedBytes).toBe(5 * MB);
    await expect(budget.charge(owner, 6 * MB, 0)).rejects.toThrow(/staging budget \(10 MB\)/);
    expect(budget.usedBytes).toBe(5 * MB); // a refused charge is not counted
    budget.release(5 * MB);
    expect(budget.usedBytes).toBe(0);
  });

  it("refuses when the disk would keep less than its floor, counting what admitted uploads may still write", async () => {
    const free = await freeBytes(dir);
    const budget = new StagingBudget({ limitBytes: Number.MAX_SAFE_INTEGER, dir, floorBytes: free - 100 * MB });
    await budget.admit(60 * MB); // fits: 100 MB above the floor
    await expect(budget.admit(60 * MB)).rejects.toThrow(/disk is nearly full/); // 60 MB reserved already
    expect(budget.usedBytes).toBe(60 * MB);
    budget.unreserve(60 * MB);
    await budget.admit(60 * MB);
  });
});
