/**
 * The transcription result (docs/api.md, "Transcription"): times in seconds on the original
 * audio's timeline, confidences in 0–1. With diarization, segments and words carry `speaker`
 * and `transcript_with_speakers` lists the speaker turns.
 */
import { z } from "zod";
export interface Word {
  word: string;
  start: number;
  end: number;
  confidence: number;
  speaker?: string;
}

export interface Segment {
  id: number;
  start: number;
  end: number;
  text: string;
  words: Word[];
  speaker?: string;
  /** With translation: the text as spoken (`text` is the translation; words stay as spoken). */
  original_text?: string;
}

export interface SpeakerTurn {
  speaker: string;
  start: number;
  end: number;
  text: string;
  original_text?: string;
}

export interface Transcript {
  text: string;
  /** The language spoken (requested, or detected by whisper). */
  language: string;
  /**
   * When detected: whisper's probability for it (0–1), the mean over the chunks that detected it,
   * weighted by their speech. Absent when the request named the language.
   */
  language_probability?: number;
  /** The audio's duration in seconds. */
  duration: number;
  /** "transcribe" or "translate" (whisper's task; translate means into English). */
  task: "transcribe" | "translate";
  model: string;
  segments: Segment[];
  transcript_with_speakers?: SpeakerTurn[];
  /** With translation: the language `text` was translated into, and the text as spoken. */
  translated_to?: string;
  original_text?: string;
}

// --- the same shapes as schemas: what a scheduler accepts from an agent ---------------------------

const time = z.number().finite().min(0);
const text = z.string().max(1_000_000);

const wordSchema = z.object({ word: text, start: time, end: time, confidence: z.number().finite(), speaker: z.string().max(64).optional() });

export const segmentSchema = z.object({
  id: z.number().int().min(0),
  start: time,
  end: time,
  text,
  words: z.array(wordSchema).max(100_000),
  speaker: z.string().max(64).optional(),
  original_text: text.optional(),
});

/** A transcript as an agent sends it over the fleet link (checked before it is rendered for a client). */
export const transcriptSchema = z.object({
  text: z.string().max(64 * 1024 ** 2),
  language: z.string().max(16),
  language_probability: z.number().finite().min(0).max(1).optional(),
  duration: time,
  task: z.enum(["transcribe", "translate"]),
  model: z.string().max(64),
  segments: z.array(segmentSchema).max(1_000_000),
  transcript_with_speakers: z.array(z.object({ speaker: z.string().max(64), start: time, end: time, text, original_text: text.optional() })).optional(),
  translated_to: z.string().max(16).optional(),
  original_text: z
    .string()
    .max(64 * 1024 ** 2)
    .optional(),
});
