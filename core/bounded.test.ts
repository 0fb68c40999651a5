import { describe, expect, it } from "vitest";
import { rememberAtMost } from "./bounded.js";

describe("rememberAtMost", () => {
  it("keeps at most `most` entries, forgetting the oldest first; setting a key it holds forgets nothing", () => {
    const map = new Map<string, number>();
    for (let i = 0; i < 5; i++) rememberAtMost(map, `k${i}`, i, 3);
    expect([...map.keys()]).toEqual(["k2", "k3", "k4"]);
    rememberAtMost(map, "k3", 30, 3);
    expect([...map]).toEqual([
      ["k2", 2],
      ["k3", 30],
      ["k4", 4],
    ]);
  });
});
