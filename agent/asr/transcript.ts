/**
 * The transcription result (README, "Transcription"): times in seconds on the original
 * audio's timeline, confidences in 0–1. With diarization, segments and words carry `speaker`
 * and `transcript_with_speakers` lists the speaker turns.
 */
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
