/**
 * From speech spans to whisper inputs. Spans are padded a little (whisper hears word onsets
 * better with some context), then packed, silence removed, into chunks of at most 30 s (one
 * whisper window each). A chunk remembers where each of its pieces came from, so times that
 * whisper reports on the chunk map back to the original timeline.
 */
import { SAMPLE_RATE } from "./ffmpeg.js";
import type { SpeechSpan } from "./vad/index.js";

/** A stretch of the original audio inside a chunk: original samples [start, end). */
export interface Piece {
  start: number;
  end: number;
}

export interface Chunk {
  index: number;
  pieces: Piece[];
  /** Total samples of the chunk (the sum of its pieces). */
  samples: number;
}

export interface ChunkOptions {
  /** Longest chunk, in seconds. Default 30. */
  maxSeconds?: number;
  /** Padding added on each side of a span, in seconds. Default 0.2. */
  padSeconds?: number;
}

/** Pads, merges overlaps, splits over-long spans and packs them, in order, into chunks. */
export function planChunks(spans: readonly SpeechSpan[], totalSamples: number, options: ChunkOptions = {}): Chunk[] {
  const max = Math.floor((options.maxSeconds ?? 30) * SAMPLE_RATE);
  const pad = Math.floor((options.padSeconds ?? 0.2) * SAMPLE_RATE);
  const padded: Piece[] = [];
  for (const s of [...spans].sort((a, b) => a.start - b.start)) {
    const start = Math.max(0, s.start - pad);
    const end = Math.min(totalSamples, s.end + pad);
    if (end <= start) continue;
    const last = padded[padded.length - 1];
    if (last && start <= last.end) last.end = Math.max(last.end, end);
    else padded.push({ start, end });
  }
  const pieces = padded.flatMap((p) => {
    const out: Piece[] = [];
    for (let at = p.start; at < p.end; at += max) out.push({ start: at, end: Math.min(p.end, at + max) });
    return out;
  });
  const chunks: Chunk[] = [];
  for (const p of pieces) {
    const len = p.end - p.start;
    const current = chunks[chunks.length - 1];
    if (current && current.samples + len <= max) {
      current.pieces.push(p);
      current.samples += len;
    } else {
      chunks.push({ index: chunks.length, pieces: [p], samples: len });
    }
  }
  return chunks;
}

/** Maps a time in seconds on the chunk's own (silence-free) timeline to the original timeline. */
export function chunkTimeToOriginal(chunk: Chunk, seconds: number): number {
  let at = Math.max(0, Math.round(seconds * SAMPLE_RATE));
  for (const p of chunk.pieces) {
    const len = p.end - p.start;
    if (at <= len) return (p.start + at) / SAMPLE_RATE;
    at -= len;
  }
  const last = chunk.pieces[chunk.pieces.length - 1]!;
  return last.end / SAMPLE_RATE;
}

/** Seconds of audio covered by the chunks. */
export function chunkSeconds(chunks: readonly Chunk[]): number {
  return chunks.reduce((a, c) => a + c.samples, 0) / SAMPLE_RATE;
}
