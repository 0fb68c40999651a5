/**
 * From whisper's tokens to words. whisper.cpp reports BPE tokens with probabilities and
 * (with `token_timestamps`) start/end times; a token whose text starts with a space starts a new
 * word, punctuation sticks to the word before it, special tokens (`[_TT_150]`, `[_EOT_]`, …) are
 * dropped. Times are mapped from the chunk back to the original audio and kept ordered and
 * inside their segment.
 */
import { chunkTimeToOriginal, type Chunk } from "./chunks.js";
import { SAMPLE_RATE } from "./ffmpeg.js";
import type { Segment, Word } from "../../speech/transcript.js";
import type { WhisperSegment, WhisperToken } from "./whisper.js";

const SPECIAL = /^(\[_[A-Z0-9_]*\]|<\|[^|]*\|>)$/;
const WORDLESS = /^[^\p{L}\p{N}]+$/u;

const round = (s: number) => Math.round(s * 1000) / 1000;
const clamp = (v: number, lo: number, hi: number) => Math.min(hi, Math.max(lo, v));

function isSpecialToken(token: WhisperToken): boolean {
  return SPECIAL.test(token.text.trim());
}

/** Whisper's segments of one chunk as transcript segments on the original timeline (ids unset). */
export function segmentsFromChunk(chunk: Chunk, decoded: readonly WhisperSegment[]): Omit<Segment, "id">[] {
  const chunkSeconds = chunk.samples / SAMPLE_RATE;
  const toOriginal = (ms: number | undefined, fallback: number) => chunkTimeToOriginal(chunk, clamp((ms ?? fallback * 1000) / 1000, 0, chunkSeconds));
  const out: Omit<Segment, "id">[] = [];
  for (const seg of decoded) {
    const text = seg.text.trim();
    if (!text) continue;
    const start = toOriginal(seg.from, 0);
    const end = Math.max(start, toOriginal(seg.to, chunkSeconds));
    const words = wordsFromTokens(seg.tokens, start, end, (ms) => toOriginal(ms, 0));
    out.push({ start: round(start), end: round(end), text, words });
  }
  return out;
}

/** Groups tokens into words, timed inside [segStart, segEnd] and never going backwards. */
export function wordsFromTokens(tokens: readonly WhisperToken[], segStart: number, segEnd: number, toOriginal: (ms: number) => number): Word[] {
  interface Draft {
    text: string;
    start?: number;
    end?: number;
    probs: number[];
  }
  const drafts: Draft[] = [];
  for (const token of tokens) {
    if (isSpecialToken(token) || token.text === "") continue;
    const current = drafts[drafts.length - 1];
    const startsWord = !current || (/^\s/.test(token.text) && !WORDLESS.test(token.text));
    const target = startsWord ? ({ text: "", probs: [] } as Draft) : current;
    if (startsWord) drafts.push(target);
    target.text += token.text;
    target.probs.push(token.p);
    if (token.from !== undefined && target.start === undefined) target.start = toOriginal(token.from);
    if (token.to !== undefined) target.end = toOriginal(token.to);
  }
  const words: Word[] = [];
  let cursor = segStart;
  for (const d of drafts) {
    const word = d.text.trim();
    if (!word) continue;
    const start = clamp(d.start ?? cursor, cursor, segEnd);
    const end = clamp(d.end ?? start, start, segEnd);
    const mean = d.probs.reduce((a, b) => a + b, 0) / d.probs.length;
    words.push({ word, start: round(start), end: round(end), confidence: round(clamp(Number.isFinite(mean) ? mean : 0, 0, 1)) });
    cursor = end;
  }
  return words;
}
