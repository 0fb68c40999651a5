/**
 * What a transcription request asks for, once its form fields are validated (`./fields.ts`): the
 * agent's job options, which the scheduler checks too before it routes an upload.
 */

/** What the user asked for, as validated at upload. */
export interface JobOptions {
  model: string;
  language?: string;
  translate: boolean;
  targetLanguage?: string;
  speakerDiarization: boolean;
  minSpeakers?: number;
  maxSpeakers?: number;
  /** How whisper decodes (prompt, temperatures, thresholds). */
  decoding?: DecodingOptions;
  /** Voice activity: the speech threshold (0–1) and the silence that ends a span (seconds). */
  vad?: { threshold?: number; minSilenceSeconds?: number };
  /** Sent by the scheduler over the fleet link: no one waits for it after a restart, so it is not resumed. */
  fleet?: boolean;
}

export interface DecodingOptions {
  /** Text whisper takes as what came before the audio (its initial prompt): names, terms, a style. */
  prompt?: string;
  /** The first decoding temperature, 0–1. whisper.cpp's default 0 (greedy). */
  temperature?: number;
  /** The step of the temperature fallback: 0 (off) or 0.2–1. Default 0.2. */
  temperatureIncrement?: number;
  /**
   * A decode whose last tokens' entropy is below this (repetitive text) is tried again hotter:
   * whisper.cpp's stand-in for OpenAI's compression-ratio test, in the other direction (higher is
   * stricter). 0–4, default 2.4.
   */
  entropyThreshold?: number;
  /** A decode whose mean log probability is below this is tried again hotter. −10 to −0.1, default −1. */
  logprobThreshold?: number;
  /** A window whose no-speech probability is above this (and whose log probability is low) is silence. Default 0.6. */
  noSpeechThreshold?: number;
}
