/** Messages between the VAD worker thread and the thread that asked for speech spans. */

/** A stretch of speech, in samples of the 16 kHz stream: [start, end). */
export interface SpeechSpan {
  start: number;
  end: number;
}

export interface VadRequest {
  pcmPath: string;
  model: string;
  threshold: number;
  minSilenceSeconds: number;
  minSpeechSeconds: number;
  maxSpeechSeconds: number;
}
