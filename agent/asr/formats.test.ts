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
    text: "one two", language: "en", duration: 3700, task: "transcribe", model: "base",
    segments: [{ id: 0, start: 3600.25, end: 3601.5, text: "one two", words: [word("one", 3600.25, 3600.8), word("two", 3600.9, 3601.5)] }],
  };
  it("writes SRT, VTT, TXT and JSON", () => {
    expect(render(transcript, "srt")).toBe("1\n01:00:00,250 --> 01:00:01,500\none two\n");
    expect(render(transcript, "vtt")).toBe("WEBVTT\n\n01:00:00.250 --> 01:00:01.500\none two\n");
    expect(render(transcript, "txt")).toBe("one two\n");
    expect(JSON.parse(render(transcript, "json"))).toEqual(transcript);
  });
});
