import { describe, expect, it } from "vitest";
import { attributeSpeakers } from "./speakers.js";
import type { Segment } from "./transcript.js";

const w = (word: string, start: number, end: number) => ({ word, start, end, confidence: 0.9 });

describe("attributeSpeakers", () => {
  it("gives each word the speaker overlapping it most, splits segments at changes, labels by first appearance", () => {
    const segments: Segment[] = [
      { id: 0, start: 0, end: 4, text: "a b c d", words: [w("a", 0, 0.9), w("b", 1, 1.9), w("c", 2.2, 2.9), w("d", 3, 3.9)] },
      { id: 1, start: 5, end: 6, text: "e", words: [w("e", 5, 5.5)] },
    ];
    const turns = [{ start: 0, end: 2.1, speaker: 7 }, { start: 2.1, end: 4, speaker: 3 }, { start: 6.2, end: 7, speaker: 7 }];
    const r = attributeSpeakers(segments, turns);
    expect(r.segments.map((s) => [s.id, s.speaker, s.text])).toEqual([
      [0, "SPEAKER_00", "a b"], [1, "SPEAKER_01", "c d"], [2, "SPEAKER_00", "e"], // "e" overlaps nothing: nearest turn
    ]);
    for (const s of r.segments) for (const word of s.words) expect(word.speaker).toBe(s.speaker);
    expect(r.turns).toEqual([
      { speaker: "SPEAKER_00", start: 0, end: 1.9, text: "a b" },
      { speaker: "SPEAKER_01", start: 2.2, end: 3.9, text: "c d" },
      { speaker: "SPEAKER_00", start: 5, end: 5.5, text: "e" },
    ]);
  });
});
