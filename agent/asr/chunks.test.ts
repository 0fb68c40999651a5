/** Chunk planning: padding, merging, splitting and packing speech into whisper windows, and mapping times back. */
import { describe, expect, it } from "vitest";
import { chunkSeconds, chunkTimeToOriginal, planChunks } from "./chunks.js";

const SR = 16_000;
const s = (start: number, end: number) => ({ start: start * SR, end: end * SR });

describe("planChunks", () => {
  it("pads each span by 0.2 s, clipped to the audio, and merges spans that then overlap", () => {
    const chunks = planChunks([s(1, 2), s(2.3, 3), s(0.1, 0.5)], 3.1 * SR);
    expect(chunks).toHaveLength(1);
    expect(chunks[0]!.pieces).toEqual([
      { start: 0, end: 0.7 * SR },
      { start: 0.8 * SR, end: 3.1 * SR },
    ]);
    expect(chunks[0]!.samples).toBe(0.7 * SR + 2.3 * SR);
    expect(chunks[0]!.index).toBe(0);
  });

  it("honours the pad and window options, and drops empty spans", () => {
    const chunks = planChunks([s(1, 2), s(5, 5)], 10 * SR, { padSeconds: 0, maxSeconds: 30 });
    expect(chunks.map((c) => c.pieces)).toEqual([[{ start: SR, end: 2 * SR }]]);
  });

  it("packs pieces into windows of at most maxSeconds, in order, and splits a longer span", () => {
    const chunks = planChunks([s(0, 25), s(40, 50), s(60, 135)], 200 * SR, { padSeconds: 0, maxSeconds: 30 });
    // The 75 s span becomes 30 + 30 + 15 s pieces, each started anew rather than cut to fill a window.
    expect(chunks.map((c) => c.samples / SR)).toEqual([25, 10, 30, 30, 15]);
    expect(chunks.map((c) => c.index)).toEqual([0, 1, 2, 3, 4]);
    expect(chunks[1]!.pieces).toEqual([{ start: 40 * SR, end: 50 * SR }]);
    expect(chunks[2]!.pieces).toEqual([{ start: 60 * SR, end: 90 * SR }]);
    expect(chunks[4]!.pieces).toEqual([{ start: 120 * SR, end: 135 * SR }]);
    expect(chunkSeconds(chunks)).toBe(110);
  });

  it("pieces share a window while they fit, exactly filling it included", () => {
    const chunks = planChunks([s(0, 10), s(20, 40), s(45, 46)], 60 * SR, { padSeconds: 0, maxSeconds: 30 });
    expect(chunks.map((c) => c.pieces.length)).toEqual([2, 1]);
    expect(chunks.map((c) => c.samples / SR)).toEqual([30, 1]);
  });

  it("merges spans that touch, so a long run of speech is split at the window, not where two spans met", () => {
    const chunks = planChunks([s(0, 20), s(20, 40)], 60 * SR, { padSeconds: 0, maxSeconds: 30 });
    expect(chunks.map((c) => c.pieces)).toEqual([[{ start: 0, end: 30 * SR }], [{ start: 30 * SR, end: 40 * SR }]]);
  });

  it("a span of exactly the window is one piece, with no empty piece after it", () => {
    const chunks = planChunks([s(0, 30), s(40, 41)], 60 * SR, { padSeconds: 0, maxSeconds: 30 });
    expect(chunks.map((c) => c.pieces)).toEqual([[{ start: 0, end: 30 * SR }], [{ start: 40 * SR, end: 41 * SR }]]);
  });

  it("no speech, no chunks", () => {
    expect(planChunks([], 10 * SR)).toEqual([]);
    expect(chunkSeconds([])).toBe(0);
  });
});

describe("chunkTimeToOriginal", () => {
  const chunk = {
    index: 0,
    pieces: [
      { start: 10 * SR, end: 12 * SR },
      { start: 20 * SR, end: 25 * SR },
    ],
    samples: 7 * SR,
  };
  it("maps a time on the chunk's timeline into the piece it falls in", () => {
    expect(chunkTimeToOriginal(chunk, 0)).toBe(10);
    expect(chunkTimeToOriginal(chunk, 1.5)).toBe(11.5);
    expect(chunkTimeToOriginal(chunk, 2)).toBe(12); // the end of the first piece
    expect(chunkTimeToOriginal(chunk, 2.5)).toBe(20.5);
    expect(chunkTimeToOriginal(chunk, 7)).toBe(25);
  });
  it("clamps times before the start and after the end", () => {
    expect(chunkTimeToOriginal(chunk, -3)).toBe(10);
    expect(chunkTimeToOriginal(chunk, 99)).toBe(25);
  });
});
