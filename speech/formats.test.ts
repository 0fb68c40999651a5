import { describe, expect, it } from "vitest";
import { buildCues, render, timestamp, wrap, CUE_LINE_CHARS, CUE_MAX_SECONDS } from "./formats.js";
import type { Segment, Transcript } from "./transcript.js";

const word = (w: string, start: number, end: number) => ({ word: w, start, end, confidence: 0.9 });

describe("timestamp", () => {
  it("formats hours past one hour (and past 99) for SRT and VTT", () => {
    expect(timestamp(0, ",")).toBe("00:00:00,000");
    expect(timestamp(3725.5, ",")).toBe("01:02:05,500");
    expect(timestamp(3725.5, ".")).toBe("01:02:05.500");
    expect(timestamp(14_399.999, ",")).toBe("03:59:59,999");
    expect(timestamp(360_000, ".")).toBe("100:00:00.000");
  });
});

describe("cues", () => {
  it("wrap keeps lines within the width", () => {
    const lines = wrap("the quick brown fox jumps over the lazy dog and keeps running far away");
    for (const l of lines) expect(l.length).toBeLessThanOrEqual(CUE_LINE_CHARS);
  });

  it("split long segments into short ordered cues of at most two lines and 7 s, never overlapping", () => {
    const words = Array.from({ length: 60 }, (_, i) => word(`word${i}`, i * 0.5, i * 0.5 + 0.6)); // overlapping words
    const segments: Segment[] = [{ id: 0, start: 0, end: 30.6, text: words.map((w) => w.word).join(" "), words }];
    const cues = buildCues(segments);
    expect(cues.length).toBeGreaterThan(3);
    let previousEnd = 0;
    for (const c of cues) {
      expect(c.start).toBeGreaterThanOrEqual(previousEnd);
      expect(c.end).toBeGreaterThan(c.start);
      expect(c.end - c.start).toBeLessThanOrEqual(CUE_MAX_SECONDS);
      expect(c.lines.length).toBeLessThanOrEqual(2);
      previousEnd = c.end;
    }
  });

  it("spread a wordless segment's text over its time, and start a cue at each speaker change", () => {
    const segments: Segment[] = [
      { id: 0, start: 0, end: 4, text: "hello there", words: [], speaker: "SPEAKER_00" },
      { id: 1, start: 4, end: 6, text: "hi", words: [word("hi", 4.1, 4.5)], speaker: "SPEAKER_01" },
    ];
    const cues = buildCues(segments);
    expect(cues.map((c) => c.speaker)).toEqual(["SPEAKER_00", "SPEAKER_01"]);
    expect(cues[0]).toMatchObject({ start: 0, end: 4, lines: ["hello there"] });
  });
});

describe("render", () => {
  const transcript: Transcript = {
    text: "one two",
    language: "en",
    duration: 3700,
    task: "transcribe",
    model: "base",
    segments: [{ id: 0, start: 3600.25, end: 3601.5, text: "one two", words: [word("one", 3600.25, 3600.8), word("two", 3600.9, 3601.5)] }],
  };
  it("writes SRT, VTT, TXT and JSON", () => {
    expect(render(transcript, "srt")).toBe("1\n01:00:00,250 --> 01:00:01,500\none two\n");
    expect(render(transcript, "vtt")).toBe("WEBVTT\n\n01:00:00.250 --> 01:00:01.500\none two\n");
    expect(render(transcript, "txt")).toBe("one two\n");
    expect(JSON.parse(render(transcript, "json"))).toEqual(transcript);
  });
});

describe("formats, exactly", () => {
  const transcript = (segments: Segment[]): Transcript =>
    ({ text: segments.map((s) => s.text).join(" "), language: "en", duration: 10, task: "transcribe", model: "base", segments }) as Transcript;

  it("writes each format byte for byte, speakers included", () => {
    const t = transcript([
      { id: 0, start: 0, end: 1.5, text: "hello there", words: [word("hello", 0, 0.5), word("there", 0.6, 1.5)], speaker: "SPEAKER_00" },
      { id: 1, start: 2, end: 3, text: "general", words: [word("general", 2, 3)], speaker: "SPEAKER_01" },
    ]);
    expect(render(t, "txt")).toBe("[SPEAKER_00] hello there\n[SPEAKER_01] general\n");
    expect(render(t, "srt")).toBe("1\n00:00:00,000 --> 00:00:01,500\nSPEAKER_00: hello there\n\n2\n00:00:02,000 --> 00:00:03,000\nSPEAKER_01: general\n");
    expect(render(t, "vtt")).toBe("WEBVTT\n\n00:00:00.000 --> 00:00:01.500\n<v SPEAKER_00>hello there\n\n00:00:02.000 --> 00:00:03.000\n<v SPEAKER_01>general\n");
    const plain = transcript([{ id: 0, start: 0, end: 1, text: "just text", words: [word("just", 0, 0.4), word("text", 0.5, 1)] }]);
    expect(render(plain, "txt")).toBe("just text\n");
    expect(render(plain, "srt")).toBe("1\n00:00:00,000 --> 00:00:01,000\njust text\n");
    expect(render(transcript([]), "txt")).toBe("");
    expect(render(transcript([]), "vtt")).toBe("WEBVTT\n");
  });

  it("a two-line cue carries the speaker on its first line only", () => {
    const words = "one two three four five six seven eight nine ten eleven twelve".split(" ").map((x, i) => word(x, i * 0.3, i * 0.3 + 0.25));
    const t = transcript([{ id: 0, start: 0, end: 4, text: words.map((x) => x.word).join(" "), words, speaker: "SPEAKER_03" }]);
    const srt = render(t, "srt").split("\n");
    expect(srt[2]).toMatch(/^SPEAKER_03: one /);
    expect(srt[3]).not.toMatch(/SPEAKER/);
    expect(render(t, "vtt").split("\n")[3]).toMatch(/^<v SPEAKER_03>one /);
  });

  it("wraps at exactly the width, splitting on any run of white space", () => {
    expect(wrap("aaaa bbbb", 9)).toEqual(["aaaa bbbb"]);
    expect(wrap("aaaa bbbbb", 9)).toEqual(["aaaa", "bbbbb"]);
    expect(wrap("  a \t b\n\nc  ", 42)).toEqual(["a b c"]);
  });

  it("spreads a wordless segment's words evenly from its start", () => {
    const cues = buildCues([{ id: 0, start: 10, end: 12, text: "a  b", words: [] }]);
    expect(cues).toEqual([{ start: 10, end: 12, lines: ["a b"] }]);
    const long = buildCues([{ id: 0, start: 0, end: 20, text: Array.from({ length: 40 }, (_, i) => `w${i}`).join(" "), words: [] }]);
    expect(long[0]!.start).toBe(0);
    expect(long[1]!.start).toBeCloseTo(long[0]!.end, 6); // the next word's start: evenly spaced
    expect(long.at(-1)!.end).toBeCloseTo(20, 6);
  });

  it("a cue holds words while they fit: at most 84 characters, 2 lines and 7 s, exactly those included", () => {
    const exactly7 = buildCues([{ id: 0, start: 0, end: 7, text: "a b", words: [word("a", 0, 1), word("b", 6, 7)] }]);
    expect(exactly7).toHaveLength(1);
    const over7 = buildCues([{ id: 0, start: 0, end: 7.1, text: "a b", words: [word("a", 0, 1), word("b", 6, 7.1)] }]);
    expect(over7).toHaveLength(2);
    const w21 = "x".repeat(20); // 4 × 20 + 3 spaces = 83 characters, two lines of 41
    const fourWords = buildCues([{ id: 0, start: 0, end: 4, text: "", words: [0, 1, 2, 3].map((i) => word(w21, i, i + 0.5)) }]);
    expect(fourWords).toHaveLength(1);
    expect(fourWords[0]!.lines).toEqual([`${w21} ${w21}`, `${w21} ${w21}`]);
    const w42 = "y".repeat(42); // two words of 42 fill two lines exactly: 85 characters with the space, over 84
    expect(buildCues([{ id: 0, start: 0, end: 2, text: "", words: [word(w42, 0, 0.5), word(w42, 1, 1.5)] }])).toHaveLength(2);
  });

  it("orders cues by start across segments, and gives a zero-length word a visible moment", () => {
    const cues = buildCues([
      { id: 0, start: 5, end: 6, text: "late", words: [word("late", 5, 6)] },
      { id: 1, start: 1, end: 2, text: "early", words: [word("early", 1, 1)] },
    ]);
    expect(cues.map((c) => c.lines[0])).toEqual(["early", "late"]);
    expect(cues[0]!.end).toBeCloseTo(1.04, 6);
  });

  it("a single word longer than two lines stays one cue of at most two lines", () => {
    const t = "z".repeat(100);
    const cues = buildCues([{ id: 0, start: 0, end: 1, text: t, words: [word(t, 0, 1)] }]);
    expect(cues).toHaveLength(1);
    expect(cues[0]!.lines.length).toBeLessThanOrEqual(2);
  });

  it("writes a two-line cue's lines one under the other", () => {
    const words = "one two three four five six seven eight nine ten eleven twelve".split(" ").map((x, i) => word(x, i * 0.3, i * 0.3 + 0.25));
    const t = transcript([{ id: 0, start: 0, end: 4, text: words.map((x) => x.word).join(" "), words }]);
    expect(render(t, "srt")).toBe("1\n00:00:00,000 --> 00:00:03,550\none two three four five six seven eight\nnine ten eleven twelve\n");
    expect(render(t, "vtt")).toBe("WEBVTT\n\n00:00:00.000 --> 00:00:03.550\none two three four five six seven eight\nnine ten eleven twelve\n");
  });

  it("a cue takes exactly 84 characters, and never a word that would make a third line", () => {
    const [x41, y42] = ["x".repeat(41), "y".repeat(42)];
    expect(buildCues([{ id: 0, start: 0, end: 2, text: "", words: [word(x41, 0, 0.5), word(y42, 1, 1.5)] }])).toEqual([{ start: 0, end: 1.5, lines: [x41, y42] }]);
    const [a, b, c] = ["a".repeat(30), "b".repeat(30), "c".repeat(20)]; // 82 characters, but three lines
    expect(buildCues([{ id: 0, start: 0, end: 3, text: "", words: [word(a, 0, 0.5), word(b, 1, 1.5), word(c, 2, 2.5)] }]).map((cue) => cue.lines)).toEqual([[a, b], [c]]);
  });

  it("a single word that wraps to three lines (whisper's word with spaces in it) keeps two: the rest goes on the second", () => {
    const [a, b, c] = ["a".repeat(30), "b".repeat(30), "c".repeat(20)];
    expect(buildCues([{ id: 0, start: 0, end: 1, text: "", words: [word(`${a} ${b} ${c}`, 0, 1)] }])).toEqual([{ start: 0, end: 1, lines: [a, `${b} ${c}`] }]);
  });

  it("spreads a wordless segment's words, ignoring white space at its ends", () => {
    expect(buildCues([{ id: 0, start: 0, end: 16, text: " a b ", words: [] }])).toEqual([
      { start: 0, end: 7, lines: ["a"] },
      { start: 8, end: 15, lines: ["b"] },
    ]);
  });
});
