import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../core/log.js";
import { testDb } from "../../test/helpers/db.js";
import { openStore, type Store } from "../store/index.js";
import { StoreClaims } from "./claims.js";

let db: Store;
beforeAll(async () => {
  db = await openStore(testDb(), { logger: createLogger("test", "silent") });
});
afterAll(() => db?.close());

describe("placement claims in the database", () => {
  it("gives a model to one scheduler at a time until its claim runs out, and lets the holder renew it", async () => {
    let now = 1_000_000;
    const a = new StoreClaims(db, () => now);
    const b = new StoreClaims(db, () => now);
    const [first, second] = await Promise.all([a.claim("m", 10_000), b.claim("m", 10_000)]);
    expect([first, second].sort()).toEqual([false, true]);
    const holder = first ? a : b;
    const other = first ? b : a;
    expect(await holder.claim("m", 10_000)).toBe(true);
    expect(await other.claim("other-model", 10_000)).toBe(true);
    now += 9_999;
    expect(await other.claim("m", 10_000)).toBe(false);
    now += 10_001;
    expect(await other.claim("m", 10_000)).toBe(true);
    expect(await holder.claim("m", 10_000)).toBe(false);
  });
});
