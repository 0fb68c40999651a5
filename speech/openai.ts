/**
 * A transcript in the shapes of OpenAI's audio API (`/v1/audio/transcriptions` and `/translations`):
 * `json`, `text`, `verbose_json` (segments, and words when asked; `srt` and `vtt` are Kiln's subtitle
 * cues, `./formats.ts` `render`), and the streamed `transcript.text.*` events.
 */
import { deflateSync } from "node:zlib";
import { WHISPER_LANGUAGES } from "../models/whisper.js";
import type { Segment, Transcript } from "./transcript.js";

/** OpenAI's `usage` of an audio request billed by duration: whole seconds, rounded up. */
export function audioUsage(t: Transcript): { type: "duration"; seconds: number } {
  return { type: "duration", seconds: Math.ceil(t.duration) };
}

/** `response_format=json`. */
export function jsonBody(t: Transcript): { text: string; usage: { type: "duration"; seconds: number } } {
  return { text: t.text, usage: audioUsage(t) };
}

/** `response_format=text`: the text and a line end. */
export function textBody(t: Transcript): string {
  return `${t.text}\n`;
}

export interface VerboseSegment {
  id: number;
  /** Where the segment starts in whisper's 10 ms frames (OpenAI's `seek`). */
  seek: number;
  start: number;
  end: number;
  text: string;
  /** The mean natural log of the segment's word confidences. */
  avg_logprob: number;
  /** The text's length over its zlib-compressed length (whisper's repetition measure). */
  compression_ratio: number;
  /** Whisper's token ids: not carried from the node (its words are), so always empty. */
  tokens: number[];
  /** The temperature decoding started at (the request's, default 0); whisper's fallback may have decoded the segment hotter, which the node does not report. */
  temperature: number;
  /** Not measured: always 0. The node gives whisper only what its voice-activity model found to be speech, and does not read whisper's own no-speech probability. */
  no_speech_prob: number;
  /** With diarization. */
  speaker?: string;
}

/**
 * `response_format=verbose_json`: task, language (its English name, as OpenAI gives it), duration,
 * text and segments; `words` too when `timestamp_granularities[]` asked for them. Kiln's extras:
 * `language_code`, `language_probability` when detected, `translated_to` with a `target_language`,
 * and speakers with diarization. `temperature`: the request's first decoding temperature, which each
 * segment carries (VerboseSegment says what its other stand-ins are).
 */
export function verboseBody(t: Transcript, words: boolean, temperature = 0): Record<string, unknown> {
  return {
    task: t.task,
    language: (WHISPER_LANGUAGES[t.language] ?? t.language).toLowerCase(),
    language_code: t.language,
    ...(t.language_probability !== undefined ? { language_probability: t.language_probability } : {}),
    ...(t.translated_to ? { translated_to: t.translated_to } : {}),
    duration: t.duration,
    text: t.text,
    segments: t.segments.map((s) => verboseSegment(s, temperature)),
    ...(words ? { words: t.segments.flatMap((s) => s.words.map((w) => ({ word: w.word.trim(), start: w.start, end: w.end, ...(w.speaker ? { speaker: w.speaker } : {}) }))) } : {}),
    usage: audioUsage(t),
  };
}

/** A segment in OpenAI's shape: the fields whisper gives Kiln, and honest stand-ins for those it does not (VerboseSegment). */
function verboseSegment(s: Segment, temperature: number): VerboseSegment {
  const confidences = s.words.map((w) => Math.max(w.confidence, 1e-6));
  const text = Buffer.from(s.text, "utf8");
  return {
    id: s.id,
    seek: Math.round(s.start * 100),
    start: s.start,
    end: s.end,
    text: s.text,
    avg_logprob: confidences.length ? confidences.reduce((a, c) => a + Math.log(c), 0) / confidences.length : 0,
    compression_ratio: text.length ? text.length / deflateSync(text).length : 0,
    tokens: [],
    temperature,
    no_speech_prob: 0,
    ...(s.speaker ? { speaker: s.speaker } : {}),
  };
}

/**
 * The streamed events (`stream=true`): a delta per finished segment, then the whole text. (OpenAI's
 * `usage` on the done event counts tokens, which whisper does not bill by: it is left out.)
 */
export const streamEvents = {
  delta: (delta: string) => ({ type: "transcript.text.delta" as const, delta }),
  done: (t: Transcript) => ({ type: "transcript.text.done" as const, text: t.text }),
};
