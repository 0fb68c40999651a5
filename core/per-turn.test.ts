import { describe, expect, it } from "vitest";
import { oncePerTurn } from "./per-turn.js";

const nextTurn = () => new Promise(setImmediate);

describe("oncePerTurn", () => {
  it("computes once for all reads of one turn, and again in the next turn", async () => {
    let state = 1;
    let computed = 0;
    const read = oncePerTurn(() => {
      computed++;
      return state;
    });
    expect(read()).toBe(1);
    state = 2;
    expect(read()).toBe(1);
    await Promise.resolve(); // a microtask is the same turn
    expect(read()).toBe(1);
    expect(computed).toBe(1);
    await nextTurn();
    expect(read()).toBe(2);
    expect(computed).toBe(2);
  });

  it("keeps nothing when the computation throws: the next read computes again", () => {
    let fail = true;
    const read = oncePerTurn(() => {
      if (fail) throw new Error("not yet");
      return "ok";
    });
    expect(read).toThrow("not yet");
    fail = false;
    expect(read()).toBe("ok");
  });
});
