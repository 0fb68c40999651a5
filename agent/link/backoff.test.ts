/** The agent's reconnect backoff: doubling steps, capped, half fixed and half random, and a reset. */
import { describe, expect, it } from "vitest";
import { Backoff } from "./backoff.js";

describe("Backoff", () => {
  it("doubles from the initial step up to the cap, each delay between half the step and the step", () => {
    const low = new Backoff(100, 1000, () => 0);
    expect(Array.from({ length: 6 }, () => low.next())).toEqual([50, 100, 200, 400, 500, 500]);
    const high = new Backoff(100, 1000, () => 1);
    expect(Array.from({ length: 6 }, () => high.next())).toEqual([100, 200, 400, 800, 1000, 1000]);
    const mid = new Backoff(100, 1000, () => 0.5);
    expect(mid.next()).toBe(75);
  });

  it("starts over after a reset", () => {
    const b = new Backoff(100, 1000, () => 0);
    b.next();
    b.next();
    b.next();
    b.reset();
    expect(b.next()).toBe(50);
  });

  it("defaults to 250 ms doubling to 30 s, and never overflows after many attempts", () => {
    const b = new Backoff(undefined, undefined, () => 1);
    expect(b.next()).toBe(250);
    for (let i = 0; i < 100; i++) b.next();
    expect(b.next()).toBe(30_000);
  });
});
