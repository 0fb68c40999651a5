import { describe, expect, it } from "vitest";
import { median, spread } from "./cli.js";

describe("benchmark figures", () => {
  it("prints per-round ratios as their median and their range", () => {
    expect(median([1.2, 0.9, 1])).toBe(1);
    expect(spread([1.2, 0.9, 1, 1.05])).toBe("median 1.025, rounds 0.900–1.200");
  });
});
