import { describe, expect, it } from "vitest";
import { Semaphore } from "./semaphore.js";

describe("Semaphore", () => {
  it("gives permits in order, and a waiter whose signal aborts leaves the line without taking one", async () => {
    const s = new Semaphore(1);
    const release = await s.acquire();
    const stop = new AbortController();
    const order: string[] = [];
    const gaveUp = s.acquire(stop.signal).then(
      () => order.push("aborted one got a permit"),
      (err: Error) => order.push(`gave up: ${err.message}`),
    );
    const next = s.acquire().then((r) => (order.push("next"), r));
    stop.abort(new Error("cancelled"));
    await gaveUp;
    release();
    (await next)();
    expect(order).toEqual(["gave up: cancelled", "next"]);
    // the permits add up: one free again
    const again = await s.acquire();
    again();
    await expect(s.acquire(AbortSignal.abort(new Error("already")))).rejects.toThrow("already");
  });
});
