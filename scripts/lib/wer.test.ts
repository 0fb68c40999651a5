import { describe, expect, it } from "vitest";
import { wordErrorRate } from "./wer.js";

describe("wordErrorRate", () => {
  it("is 0 for the same words whatever the case and punctuation", () => {
    expect(wordErrorRate("And so, my fellow Americans!", "and so my fellow americans").wer).toBe(0);
  });
  it("counts substitutions, deletions and insertions", () => {
    const r = wordErrorRate("ask not what your country can do", "ask what my country can do for you");
    expect(r).toMatchObject({ substitutions: 1, deletions: 1, insertions: 2, referenceWords: 7 });
    expect(r.wer).toBeCloseTo(4 / 7);
  });
});
