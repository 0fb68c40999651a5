import { describe, expect, it } from "vitest";
import { attributeSpeakers } from "./speakers.js";
import type { Segment } from "../../speech/transcript.js";

const w = (word: string, start: number, end: number) => ({ word, start, end, confidence: 0.9 });

describe("attributeSpeakers", () => {
  it("gives each word the speaker overlapping it most, splits segments at changes, labels by first appearance", () => {
    const segments: Segment[] = [
      { id: 0, start: 0, end: 4, text: "a b c d", words: [w("a", 0, 0.9), w("b", 1, 1.9), w("c", 2.2, 2.9), w("d", 3, 3.9)] },
      { id: 1, start: 5, end: 6, text: "e", words: [w("e", 5, 5.5)] },
    ];
    const turns = [
      { start: 0, end: 2.1, speaker: 7 },
      { start: 2.1, end: 4, speaker: 3 },
      { start: 6.2, end: 7, speaker: 7 },
    ];
    const r = attributeSpeakers(segments, turns);
    expect(r.segments.map((s) => [s.id, s.speaker, s.text])).toEqual([
      [0, "SPEAKER_00", "a b"],
      [1, "SPEAKER_01", "c d"],
      [2, "SPEAKER_00", "e"], // "e" overlaps nothing: nearest turn
    ]);
    for (const s of r.segments) for (const word of s.words) expect(word.speaker).toBe(s.speaker);
    expect(r.turns).toEqual([
      { speaker: "SPEAKER_00", start: 0, end: 1.9, text: "a b" },
      { speaker: "SPEAKER_01", start: 2.2, end: 3.9, text: "c d" },
      { speaker: "SPEAKER_00", start: 5, end: 5.5, text: "e" },
    ]);
  });
});

describe("attributeSpeakers, the edges", () => {
  it("the turn overlapping a word most wins over one overlapping it less, whichever comes first", () => {
    const seg: Segment = { id: 0, start: 0, end: 2, text: "x", words: [w("x", 1, 2)] };
    // x spans 1–2: speaker 1 overlaps 0.3 s, speaker 2 overlaps 0.7 s.
    expect(
      attributeSpeakers(
        [seg],
        [
          { start: 0, end: 1.3, speaker: 1 },
          { start: 1.3, end: 3, speaker: 2 },
        ],
      ).segments[0]!.speaker,
    ).toBe("SPEAKER_00");
    expect(
      attributeSpeakers(
        [seg],
        [
          { start: 0, end: 1.3, speaker: 1 },
          { start: 1.3, end: 3, speaker: 2 },
        ],
      ).turns,
    ).toEqual([{ speaker: "SPEAKER_00", start: 1, end: 2, text: "x" }]);
    const two = attributeSpeakers(
      [seg, { id: 1, start: 0, end: 0.5, text: "y", words: [w("y", 0, 0.5)] }],
      [
        { start: 0, end: 1.3, speaker: 1 },
        { start: 1.3, end: 3, speaker: 2 },
      ],
    );
    // x goes to speaker 2 (first seen: SPEAKER_00), y to speaker 1 (SPEAKER_01).
    expect(two.segments.map((s) => s.speaker)).toEqual(["SPEAKER_00", "SPEAKER_01"]);
  });

  it("a word no turn overlaps takes the nearest turn, before or after it", () => {
    const turns = [
      { start: 0, end: 1, speaker: 4 },
      { start: 10, end: 11, speaker: 5 },
    ];
    const at = (start: number, end: number) =>
      attributeSpeakers(
        [
          { id: 0, start, end, text: "z", words: [w("z", start, end)] },
          { id: 1, start: 0, end: 1, text: "a", words: [w("a", 0, 1)] },
        ],
        turns,
      ).segments[0]!.speaker;
    expect(at(2, 3)).toBe("SPEAKER_00"); // nearer speaker 4 (1 s before) than 5 (7 s after); first seen → 00
    expect(at(8, 9)).toBe("SPEAKER_00"); // nearer speaker 5 (1 s after): first seen → 00, and "a" (speaker 4) → 01
    const after = attributeSpeakers(
      [
        { id: 0, start: 8, end: 9, text: "z", words: [w("z", 8, 9)] },
        { id: 1, start: 0, end: 1, text: "a", words: [w("a", 0, 1)] },
      ],
      turns,
    );
    expect(after.segments.map((s) => s.speaker)).toEqual(["SPEAKER_00", "SPEAKER_01"]);
    const before = attributeSpeakers(
      [
        { id: 0, start: 2, end: 3, text: "z", words: [w("z", 2, 3)] },
        { id: 1, start: 0, end: 1, text: "a", words: [w("a", 0, 1)] },
      ],
      turns,
    );
    expect(before.segments.map((s) => s.speaker)).toEqual(["SPEAKER_00", "SPEAKER_00"]); // both speaker 4
  });

  it("no turns at all: everyone is SPEAKER_00", () => {
    const r = attributeSpeakers([{ id: 0, start: 0, end: 1, text: "a", words: [w("a", 0, 1)] }], []);
    expect(r.segments[0]!.speaker).toBe("SPEAKER_00");
  });

  it("a segment without words keeps its text and takes the speaker of its span; consecutive ones of a speaker make one turn", () => {
    const segments: Segment[] = [
      { id: 0, start: 0, end: 1, text: "first", words: [] },
      { id: 1, start: 1, end: 2, text: "second", words: [] },
      { id: 2, start: 2, end: 3, text: "third", words: [] },
    ];
    const r = attributeSpeakers(segments, [
      { start: 0, end: 2, speaker: 9 },
      { start: 2, end: 3, speaker: 8 },
    ]);
    expect(r.segments.map((s) => [s.speaker, s.text, s.words.length])).toEqual([
      ["SPEAKER_00", "first", 0],
      ["SPEAKER_00", "second", 0],
      ["SPEAKER_01", "third", 0],
    ]);
    expect(r.turns).toEqual([
      { speaker: "SPEAKER_00", start: 0, end: 2, text: "first second" },
      { speaker: "SPEAKER_01", start: 2, end: 3, text: "third" },
    ]);
  });

  it("turns never overlap: a turn starts where the previous ended at the earliest", () => {
    const segments: Segment[] = [
      { id: 0, start: 0, end: 3, text: "a", words: [w("a", 0, 3)] },
      { id: 1, start: 2, end: 4, text: "b", words: [w("b", 2.5, 4)] },
    ];
    const r = attributeSpeakers(segments, [
      { start: 0, end: 2.4, speaker: 1 },
      { start: 2.4, end: 5, speaker: 2 },
    ]);
    expect(r.turns.map((t) => [t.speaker, t.start, t.end])).toEqual([
      ["SPEAKER_00", 0, 3],
      ["SPEAKER_01", 3, 4],
    ]);
  });

  const speakersOf = (words: ReturnType<typeof w>[], turns: { start: number; end: number; speaker: number }[]) =>
    attributeSpeakers([{ id: 0, start: 0, end: 10, text: "", words }], turns).segments.flatMap((s) => s.words.map((x) => `${x.word}:${x.speaker}`));

  it("ties go to the turn listed first: equal overlaps, and equal distances", () => {
    const turns = [
      { start: 0, end: 1.5, speaker: 1 },
      { start: 1.5, end: 3, speaker: 2 },
    ];
    expect(speakersOf([w("x", 1, 2), w("y", 2.5, 3)], turns)).toEqual(["x:SPEAKER_00", "y:SPEAKER_01"]); // x overlaps each by 0.5 s
    const apart = [
      { start: 0, end: 4, speaker: 1 },
      { start: 7, end: 9, speaker: 2 },
    ];
    expect(speakersOf([w("x", 5, 6), w("y", 8, 9)], apart)).toEqual(["x:SPEAKER_00", "y:SPEAKER_01"]); // x is 1 s from each
  });

  it("with no overlap, a (zero-length) turn inside the word is nearer than one that only touches it", () => {
    const turns = [
      { start: 2, end: 3, speaker: 1 },
      { start: 1.5, end: 1.5, speaker: 2 },
    ];
    expect(speakersOf([w("x", 1, 2), w("y", 2.5, 3)], turns)).toEqual(["x:SPEAKER_00", "y:SPEAKER_01"]);
  });

  it("a zero-length word counts as its first 10 ms", () => {
    const turns = [
      { start: 0.9, end: 1.004, speaker: 1 },
      { start: 0.9999, end: 1.5, speaker: 2 },
    ];
    expect(speakersOf([w("x", 1, 1), w("y", 1.2, 1.4)], turns)).toEqual(["x:SPEAKER_00", "y:SPEAKER_00"]); // both speaker 2
  });

  it("a word no turn can be measured against (times that are not numbers) gets SPEAKER_00, not a label of its own", () => {
    expect(speakersOf([w("a", 0, 1), w("b", NaN, NaN)], [{ start: 0, end: 1, speaker: 4 }])).toEqual(["a:SPEAKER_00", "b:SPEAKER_00"]);
  });
});
