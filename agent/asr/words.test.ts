import { describe, expect, it } from "vitest";
import { chunkTimeToOriginal, planChunks } from "./chunks.js";
import type { WhisperSegment } from "./whisper.js";
import { segmentsFromChunk, wordsFromTokens } from "./words.js";

const S = 16_000;

describe("planChunks", () => {
  it("pads spans, merges overlaps, packs them into chunks of at most 30 s and splits longer speech", () => {
    const spans = [
      { start: 1 * S, end: 3 * S },
      { start: 3.2 * S, end: 5 * S },
      { start: 10 * S, end: 50 * S },
    ];
    const chunks = planChunks(spans, 60 * S);
    for (const c of chunks) expect(c.samples).toBeLessThanOrEqual(30 * S);
    expect(chunks[0]!.pieces[0]).toEqual({ start: 0.8 * S, end: 5.2 * S }); // padded and merged
    const covered = chunks.flatMap((c) => c.pieces).reduce((a, p) => a + p.end - p.start, 0);
    expect(covered).toBe((5.2 - 0.8 + 50.2 - 9.8) * S);
  });

  it("maps chunk time back to the original timeline across the removed silence", () => {
    const [chunk] = planChunks(
      [
        { start: 2 * S, end: 4 * S },
        { start: 10 * S, end: 12 * S },
      ],
      20 * S,
      { padSeconds: 0 },
    );
    expect(chunkTimeToOriginal(chunk!, 0)).toBe(2);
    expect(chunkTimeToOriginal(chunk!, 1.5)).toBe(3.5);
    expect(chunkTimeToOriginal(chunk!, 2.5)).toBe(10.5);
    expect(chunkTimeToOriginal(chunk!, 99)).toBe(12);
  });
});

describe("words from whisper tokens", () => {
  const ms = (t: number) => t / 1000;
  it("joins BPE pieces, attaches punctuation, drops special tokens and averages confidence", () => {
    const words = wordsFromTokens(
      [
        { text: "[_BEG_]", id: 50364, p: 1, from: 0, to: 0 },
        { text: " And", id: 1, p: 0.9, from: 0, to: 300 },
        { text: " so", id: 2, p: 0.8, from: 300, to: 500 },
        { text: " Amer", id: 3, p: 0.6, from: 500, to: 800 },
        { text: "icans", id: 4, p: 0.4, from: 800, to: 1100 },
        { text: ",", id: 5, p: 1, from: 1100, to: 1100 },
        { text: "[_TT_55]", id: 50420, p: 1, from: 1100, to: 1100 },
      ],
      0,
      1.2,
      ms,
    );
    expect(words.map((w) => w.word)).toEqual(["And", "so", "Americans,"]);
    expect(words[2]).toMatchObject({ start: 0.5, end: 1.1, confidence: 0.667 });
  });

  it("keeps words inside their segment and in order even when whisper's times are not", () => {
    const words = wordsFromTokens(
      [
        { text: " b", id: 1, p: 2, from: 900, to: 400 },
        { text: " a", id: 2, p: -1, from: 100, to: 5000 },
      ],
      0.5,
      2,
      ms,
    );
    expect(words[0]).toMatchObject({ start: 0.9, end: 0.9, confidence: 1 });
    expect(words[1]).toMatchObject({ start: 0.9, end: 2, confidence: 0 });
  });

  it("places segments of a chunk on the original timeline and drops empty ones", () => {
    const [chunk] = planChunks([{ start: 5 * S, end: 7 * S }], 10 * S, { padSeconds: 0 });
    const segs = segmentsFromChunk(chunk!, [
      {
        from: 0,
        to: 1500,
        text: " hi there",
        lang: "en",
        confidence: 1,
        tokens: [
          { text: " hi", id: 1, p: 1, from: 0, to: 500 },
          { text: " there", id: 2, p: 1, from: 500, to: 1500 },
        ],
      },
      { from: 1500, to: 2000, text: "  ", lang: "en", confidence: 1, tokens: [] },
    ]);
    expect(segs).toHaveLength(1);
    expect(segs[0]).toMatchObject({ start: 5, end: 6.5, text: "hi there" });
    expect(segs[0]!.words.map((w) => [w.start, w.end])).toEqual([
      [5, 5.5],
      [5.5, 6.5],
    ]);
  });

  it("drops special tokens whisper pads with a space, empty tokens (confidence included) and words of white space only", () => {
    const words = wordsFromTokens(
      [
        { text: "  ", id: 9, p: 0.1, from: 0, to: 100 },
        { text: " [_BEG_]", id: 50364, p: 1, from: 100, to: 100 },
        { text: " hi", id: 1, p: 1, from: 100, to: 400 },
        { text: "", id: 2, p: 0, from: 400, to: 900 },
        { text: " <|endoftext|>", id: 50257, p: 0, from: 900, to: 900 },
      ],
      0,
      2,
      ms,
    );
    expect(words).toEqual([{ word: "hi", start: 0.1, end: 0.4, confidence: 1 }]);
  });

  it("only a token that starts with white space starts a word", () => {
    const words = wordsFromTokens(
      [
        { text: " it", id: 1, p: 1, from: 0, to: 200 },
        { text: "'s own", id: 2, p: 1, from: 200, to: 500 },
      ],
      0,
      1,
      ms,
    );
    expect(words.map((w) => w.word)).toEqual(["it's own"]);
  });

  it("a token without times takes the word's start from the cursor and its end from its start", () => {
    const words = wordsFromTokens(
      [
        { text: " a", id: 1, p: 1 },
        { text: " b", id: 2, p: 1, from: 600 },
        { text: " c", id: 3, p: 1, to: 900 },
      ],
      0.5,
      2,
      ms,
    );
    expect(words.map((w) => [w.word, w.start, w.end])).toEqual([
      ["a", 0.5, 0.5],
      ["b", 0.6, 0.6],
      ["c", 0.6, 0.9],
    ]);
  });

  it("a segment without times spans its chunk", () => {
    const [chunk] = planChunks([{ start: 5 * S, end: 7 * S }], 10 * S, { padSeconds: 0 });
    const segs = segmentsFromChunk(chunk!, [{ text: " hi", lang: "en", confidence: 1, tokens: [] } as unknown as WhisperSegment]);
    expect(segs).toEqual([{ start: 5, end: 7, text: "hi", words: [] }]);
  });
});
